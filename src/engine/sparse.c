/*
 * sparse.c: sparse vectors (Milvus's SPARSE_FLOAT_VECTOR) held in a VARCHAR field as text, and
 * their inner-product search (sx_sparse_search). Design: docs/internals/SPARSE.md.
 *
 * Text form (sextant.h): "i:v,i:v,...", indexes strictly increasing uint32 below 2^32 - 1,
 * values finite and >= 0 with 9 significant digits. The engine's storage never looks inside:
 * WAL, segment files, compaction and import carry the field as any VARCHAR, so no file format
 * changed for it.
 *
 * Search. Scores are inner products summed in double, always in ascending index order (the
 * canonical order: the growing scan's merge join, the exhaustive accumulation and the pruned
 * search all add a row's products in that order, so they give bit-identical scores). Per query
 * one bounded heap of the best k + offset (score descending, then segment and row ascending)
 * runs across the segments of a read view, so the bar rises from segment to segment.
 *   - Growing segment: each allowed row is parsed and merge-joined with the query.
 *   - Sealed segment: its inverted index (sx__sparse_ix: per index term, the rows that have it,
 *     ascending, with their values and the term's largest value), built on first use from the
 *     column and kept with the segment (segments are immutable once sealed; a new segment object
 *     after a flush or compaction builds its own). Exhaustive mode adds every posting into a
 *     dense accumulator (term at a time); the default is MaxScore (Turtle and Flood 1995, document
 *     at a time): terms ordered by their upper bound w * max value, the prefix of terms whose
 *     bounds together cannot beat the heap's bar are "non-essential": only rows that appear in
 *     an essential list are candidates, and a candidate's non-essential terms are looked up
 *     (binary search) only while its bound can still beat the bar. A row that enters the heap
 *     has its score recomputed in canonical order from the per-term products, so pruning changes
 *     which rows are scored, never a score; bounds are compared with a small slack so that the
 *     summation order of a bound cannot prune a row whose canonical score would enter.
 *   - Rows sharing no index with the query are never answered (as Milvus), and so are rows left
 *     empty by drop_ratio_build.
 * Memory: an index is charged to the budget as SX__MEM_INDEX (forced: the search must run) and
 * given back when the segment is freed. Deadline: checked between segments and every 1,024
 * candidate rows.
 *
 * Thread-safety: sx_sparse_search may run concurrently with itself and with writers (it reads a
 * view); two searches that find a segment without its index may both build one: the first to
 * install it under idx_mu wins, the other's is freed.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/bitset.h"
#include "util/deadline.h"
#include "util/err.h"

#define DEADLINE_ROWS 1024u
#define SLACK         1e-9 /* relative slack of a bound against the bar */

/* ---------------------------------------------------------------- text form */

size_t sx_sparse_format(const uint32_t *idx, const float *val, size_t nnz, char *buf, size_t cap)
{
    size_t len = 0; /* as snprintf: the whole length; buf gets what fits, NUL-terminated */
    for (size_t i = 0; i < nnz; i++) {
        char e[48];
        int n = snprintf(e, sizeof e, "%s%u:%.9g", i ? "," : "", (unsigned)idx[i], (double)val[i]);
        if (n < 0)
            n = 0;
        if (buf && len + 1 < cap) {
            size_t room = cap - 1 - len;
            memcpy(buf + len, e, (size_t)n < room ? (size_t)n : room);
        }
        len += (size_t)n;
    }
    if (buf && cap)
        buf[len < cap ? len : cap - 1] = '\0';
    return len;
}

/* One entry at *p: "i:v", then ',' or the end. */
static bool parse_entry(const char **p, uint32_t *idx, float *val)
{
    const char *s = *p;
    if (*s < '0' || *s > '9')
        return false;
    uint64_t i = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        i = i * 10 + (uint64_t)(*s - '0');
        if (i >= UINT32_MAX)
            return false;
    }
    if (*s++ != ':')
        return false;
    /* a value: digits, sign, '.', exponent, no spaces (strtof alone would skip them) */
    if (!((*s >= '0' && *s <= '9') || *s == '.' || *s == '-' || *s == '+'))
        return false;
    char *end = NULL;
    errno = 0;
    float v = strtof(s, &end);
    if (end == s || (*end && *end != ','))
        return false;
    *idx = (uint32_t)i;
    *val = v;
    *p = end;
    return true;
}

sx_status sx_sparse_parse(const char *text, uint32_t *idx, float *val, size_t cap, size_t *nnz)
{
    if (!text || !nnz)
        return sx__err(SX_EINVAL, "sparse vector: NULL text");
    size_t n = 0;
    const char *p = text;
    uint32_t prev = 0;
    while (*p) {
        uint32_t i;
        float v;
        if (!parse_entry(&p, &i, &v))
            return sx__err(SX_EINVAL,
                           "sparse vector: entry %zu is not \"index:value\" (an index below "
                           "2^32 - 1, a number)",
                           n);
        if (n > 0 && i <= prev)
            return sx__err(SX_EINVAL, "sparse vector: index %u of entry %zu is not above %u", i, n,
                           prev);
        if (!isfinite(v) || v < 0)
            return sx__err(SX_EINVAL, "sparse vector: value %g of index %u is %s", (double)v, i,
                           isfinite(v) ? "negative" : "not finite");
        if (n < cap) {
            idx[n] = i;
            val[n] = v;
        } else if (idx || val) {
            return sx__err(SX_EINVAL, "sparse vector: more than %zu entries", cap);
        }
        prev = i;
        n++;
        if (*p == ',') {
            p++;
            if (!*p)
                return sx__err(SX_EINVAL, "sparse vector: a ',' ends the text");
        }
    }
    *nnz = n;
    return SX_OK;
}

/* Entries in a row's text: one more than its commas (0 for ""). */
static size_t text_entries(const char *t)
{
    if (!t || !*t)
        return 0;
    size_t n = 1;
    for (; *t; t++)
        n += *t == ',';
    return n;
}

/* The value below which entries are dropped by `ratio` (Milvus's drop ratios: the floor(n *
 * ratio) smallest of n values go): entries with a value < the result are dropped, and of those
 * equal to it only enough to keep n - floor(n * ratio) (*keep_equal). Sorts a copy. */
static float drop_cut(const float *val, size_t n, float ratio, float *tmp, size_t *keep_equal)
{
    size_t drop = (size_t)floor((double)n * (double)ratio);
    *keep_equal = SIZE_MAX;
    if (drop == 0 || n == 0)
        return -1.0f;
    memcpy(tmp, val, n * sizeof *tmp);
    /* selection by sort: rows are short */
    for (size_t i = 1; i < n; i++) {
        float x = tmp[i];
        size_t j = i;
        while (j > 0 && tmp[j - 1] > x) {
            tmp[j] = tmp[j - 1];
            j--;
        }
        tmp[j] = x;
    }
    float cut = tmp[drop]; /* the smallest value kept */
    size_t equal_kept = 0;
    for (size_t i = drop; i < n && tmp[i] == cut; i++)
        equal_kept++;
    *keep_equal = equal_kept;
    return cut;
}

/* Applies a drop ratio in place (keeps index order): returns the new count. tmp: n floats. */
static size_t apply_drop(uint32_t *idx, float *val, size_t n, float ratio, float *tmp)
{
    size_t keep_equal;
    float cut = drop_cut(val, n, ratio, tmp, &keep_equal);
    if (keep_equal == SIZE_MAX)
        return n;
    /* of the values equal to the cut, the last ones (by index) are kept: deterministic */
    size_t n_equal = 0;
    for (size_t i = 0; i < n; i++)
        n_equal += val[i] == cut;
    size_t skip_equal = n_equal - keep_equal, k = 0;
    for (size_t i = 0; i < n; i++) {
        if (val[i] < cut)
            continue;
        if (val[i] == cut && skip_equal > 0) {
            skip_equal--;
            continue;
        }
        idx[k] = idx[i];
        val[k] = val[i];
        k++;
    }
    return k;
}

/* ---------------------------------------------------------------- the per-segment index */

typedef struct sx__sparse_ix {
    struct sx__sparse_ix *next; /* the segment's index of the same field for another ratio */
    float drop_ratio_build;     /* the ratio it was built with */
    size_t n_terms;
    uint32_t *terms; /* ascending */
    uint64_t *start; /* n_terms + 1 offsets into rows / vals */
    uint32_t *rows;  /* per term ascending */
    float *vals;     /* the row's value of the term */
    float *max_val;  /* per term */
    size_t n_rows;
    float *doc_len; /* per row: the sum of its values (BM25's document length) */
    double sum_len; /* of every row */
    sx__membudget *budget;
    uint64_t charged;
} sx__sparse_ix;

static void ix_free_one(sx__sparse_ix *ix)
{
    if (!ix)
        return;
    sx__mem_give(ix->budget, SX__MEM_INDEX, ix->charged);
    sx__free(ix->terms);
    sx__free(ix->start);
    sx__free(ix->rows);
    sx__free(ix->vals);
    sx__free(ix->max_val);
    sx__free(ix->doc_len);
    sx__free(ix);
}

void sx__sparse_ix_free(sx__sparse_ix *ix)
{
    while (ix) {
        sx__sparse_ix *next = ix->next;
        ix_free_one(ix);
        ix = next;
    }
}

typedef struct posting {
    uint32_t term;
    uint32_t row;
    float val;
} posting;

/* Stable LSD radix sort of p (n) by term, through tmp (n). Rows stay ascending within a term. */
static void sort_by_term(posting *p, posting *tmp, size_t n)
{
    size_t count[256];
    posting *src = p, *dst = tmp;
    for (int shift = 0; shift < 32; shift += 8) {
        memset(count, 0, sizeof count);
        for (size_t i = 0; i < n; i++)
            count[(src[i].term >> shift) & 255u]++;
        size_t sum = 0;
        for (size_t b = 0; b < 256; b++) {
            size_t c = count[b];
            count[b] = sum;
            sum += c;
        }
        for (size_t i = 0; i < n; i++)
            dst[count[(src[i].term >> shift) & 255u]++] = src[i];
        posting *t = src;
        src = dst;
        dst = t;
    }
    /* four passes: the result is back in p */
}

/* The text of row r of field f (NULL: a NULL cell). */
static const char *row_text(const sx__segment *s, size_t f, size_t r)
{
    if (sx__seg_is_null(s, f, r))
        return NULL;
    return *(const char *const *)sx__seg_cell(s, f, r, sizeof(char *));
}

static sx_status ix_build(const sx_collection *c,
                          const sx__segment *s,
                          size_t f,
                          size_t n,
                          float drop_build,
                          sx__sparse_ix **out)
{
    size_t total = 0, longest = 0;
    for (size_t r = 0; r < n; r++) {
        size_t e = text_entries(row_text(s, f, r));
        total += e;
        if (e > longest)
            longest = e;
    }
    if (total >= UINT32_MAX)
        return sx__err(SX_EINVAL, "sparse index: %zu entries in one segment", total);
    sx__sparse_ix *ix = sx__calloc(1, sizeof *ix);
    posting *p = sx__malloc((total ? total : 1) * sizeof *p);
    posting *tmp = sx__malloc((total ? total : 1) * sizeof *tmp);
    uint32_t *ri = sx__malloc((longest ? longest : 1) * sizeof *ri);
    float *rv = sx__malloc((longest ? longest : 1) * sizeof *rv);
    float *rt = sx__malloc((longest ? longest : 1) * sizeof *rt);
    sx_status st = SX_OK;
    if (!ix || !p || !tmp || !ri || !rv || !rt) {
        st = sx__err(SX_ENOMEM, "sparse index of %zu entries", total);
        goto out;
    }
    ix->drop_ratio_build = drop_build;
    ix->n_rows = n;
    ix->doc_len = sx__calloc(n ? n : 1, sizeof *ix->doc_len);
    if (!ix->doc_len) {
        st = sx__err(SX_ENOMEM, "sparse index of %zu rows", n);
        goto out;
    }
    size_t m = 0;
    for (size_t r = 0; r < n; r++) {
        const char *t = row_text(s, f, r);
        size_t k = 0;
        if (!t || !*t)
            continue;
        st = sx_sparse_parse(t, ri, rv, longest, &k);
        if (st != SX_OK) {
            st = sx__err(SX_ECORRUPT, "sparse field %s, segment %llu row %zu: %s", c->names[f],
                         (unsigned long long)s->id, r, sx_errmsg());
            goto out;
        }
        double len = 0;
        for (size_t e = 0; e < k; e++)
            len += (double)rv[e];
        ix->doc_len[r] = (float)len;
        ix->sum_len += (double)ix->doc_len[r];
        if (drop_build > 0)
            k = apply_drop(ri, rv, k, drop_build, rt);
        for (size_t e = 0; e < k; e++)
            p[m++] = (posting){ ri[e], (uint32_t)r, rv[e] };
    }
    sort_by_term(p, tmp, m);
    size_t nt = 0;
    for (size_t i = 0; i < m; i++)
        nt += i == 0 || p[i].term != p[i - 1].term;
    ix->n_terms = nt;
    ix->terms = sx__malloc((nt ? nt : 1) * sizeof *ix->terms);
    ix->start = sx__malloc((nt + 1) * sizeof *ix->start);
    ix->max_val = sx__malloc((nt ? nt : 1) * sizeof *ix->max_val);
    ix->rows = sx__malloc((m ? m : 1) * sizeof *ix->rows);
    ix->vals = sx__malloc((m ? m : 1) * sizeof *ix->vals);
    if (!ix->terms || !ix->start || !ix->max_val || !ix->rows || !ix->vals) {
        st = sx__err(SX_ENOMEM, "sparse index of %zu entries", m);
        goto out;
    }
    size_t t = SIZE_MAX;
    for (size_t i = 0; i < m; i++) {
        if (i == 0 || p[i].term != p[i - 1].term) {
            t = t == SIZE_MAX ? 0 : t + 1;
            ix->terms[t] = p[i].term;
            ix->start[t] = i;
            ix->max_val[t] = 0;
        }
        ix->rows[i] = p[i].row;
        ix->vals[i] = p[i].val;
        if (p[i].val > ix->max_val[t])
            ix->max_val[t] = p[i].val;
    }
    ix->start[nt] = m;
    ix->charged = sizeof *ix + nt * (sizeof *ix->terms + sizeof *ix->start + sizeof *ix->max_val) +
                  sizeof *ix->start + m * (sizeof *ix->rows + sizeof *ix->vals) +
                  n * sizeof *ix->doc_len;
    ix->budget = c->db->budget;
    sx__mem_force(ix->budget, SX__MEM_INDEX, ix->charged);
    *out = ix;
    ix = NULL;
out:
    ix_free_one(ix);
    sx__free(p);
    sx__free(tmp);
    sx__free(ri);
    sx__free(rv);
    sx__free(rt);
    return st;
}

static sx__sparse_ix *ix_find(sx__sparse_ix *ix, float drop)
{
    while (ix && ix->drop_ratio_build != drop)
        ix = ix->next;
    return ix;
}

/* The segment's index of field f for drop ratio `drop`, built and installed when missing. An
 * installed index is never freed before the segment (a search may be using it), so an index
 * spec whose drop_ratio_build changed adds a variant to the segment's list. */
static sx_status
ix_get(const sx_collection *c, sx__segment *s, size_t f, size_t n, float drop, sx__sparse_ix **out)
{
    sx__mutex_lock(&s->idx_mu);
    sx__sparse_ix *ix = ix_find(s->sparse[f], drop);
    sx__mutex_unlock(&s->idx_mu);
    if (ix) {
        *out = ix;
        return SX_OK;
    }
    sx__sparse_ix *built = NULL;
    sx_status st = ix_build(c, s, f, n, drop, &built);
    if (st != SX_OK)
        return st;
    sx__mutex_lock(&s->idx_mu);
    ix = ix_find(s->sparse[f], drop);
    if (!ix) {
        built->next = s->sparse[f];
        s->sparse[f] = built;
        ix = built;
        built = NULL;
    }
    sx__mutex_unlock(&s->idx_mu);
    ix_free_one(built); /* another search installed it first */
    *out = ix;
    return SX_OK;
}

/* ---------------------------------------------------------------- the heap of the best hits */

typedef struct hit {
    double score;
    uint32_t seg;
    uint32_t row;
} hit;

/* a is better than b */
static bool better(const hit *a, const hit *b)
{
    if (a->score != b->score)
        return a->score > b->score;
    if (a->seg != b->seg)
        return a->seg < b->seg;
    return a->row < b->row;
}

typedef struct heap {
    hit *h;
    size_t n, cap; /* root h[0] is the worst kept */
} heap;

static void heap_push(heap *hp, hit x)
{
    if (hp->n < hp->cap) {
        size_t i = hp->n++;
        while (i > 0) {
            size_t p = (i - 1) / 2;
            if (!better(&hp->h[p], &x))
                break;
            hp->h[i] = hp->h[p];
            i = p;
        }
        hp->h[i] = x;
        return;
    }
    if (!better(&x, &hp->h[0]))
        return;
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, w = i;
        const hit *worst = &x;
        if (l < hp->n && better(worst, &hp->h[l])) {
            worst = &hp->h[l];
            w = l;
        }
        if (r < hp->n && better(worst, &hp->h[r]))
            w = r;
        if (w == i)
            break;
        hp->h[i] = hp->h[w];
        i = w;
    }
    hp->h[i] = x;
}

/* The score a new row must beat (it comes after every kept row in storage order, so a tie does
 * not enter): -inf while the heap has room. */
static double heap_bar(const heap *hp)
{
    return hp->n < hp->cap ? -(double)INFINITY : hp->h[0].score;
}

static int hit_cmp(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    return better(x, y) ? -1 : better(y, x) ? 1 : 0;
}

/* ---------------------------------------------------------------- scoring */

/* What a row's entry adds to its score: IP w * tf; BM25 w * tf (k1 + 1) / (tf + k1 (1 - b + b dl /
 * avgdl)), w being the query value times the term's idf. */
typedef struct scorer {
    sx_sparse_scoring mode;
    double k1, b, avgdl;
} scorer;

static double contrib(const scorer *s, double w, double tf, double dl)
{
    if (s->mode == SX_SPARSE_IP)
        return w * tf;
    return w * tf * (s->k1 + 1) / (tf + s->k1 * (1 - s->b + s->b * dl / s->avgdl));
}

/* The most one entry of a list whose largest value is maxtf can add (for any dl >= 0: BM25's
 * denominator is smallest at dl = 0, and tf / (tf + K) grows with tf). */
static double bound(const scorer *s, double w, double maxtf)
{
    if (s->mode == SX_SPARSE_IP)
        return w * maxtf;
    double kmin = s->k1 * (1 - s->b);
    return maxtf + kmin > 0 ? w * maxtf * (s->k1 + 1) / (maxtf + kmin) : w * (s->k1 + 1);
}

/* ---------------------------------------------------------------- one query on one segment */

typedef struct qterm {
    uint32_t term;
    double w;
} qterm;

typedef struct seg_ctx {
    uint32_t seg_i;
    const uint64_t *allow; /* NULL: every row of the view */
    size_t n;              /* rows of the view */
    uint64_t scored;       /* rows scored (statistics for tests and benchmarks) */
} seg_ctx;

static bool allowed(const seg_ctx *sc, uint32_t row)
{
    return row < sc->n && (!sc->allow || sx__bits_test(sc->allow, row));
}

/* Growing (or any) segment, row by row: parse, drop, merge-join in index order. */
static sx_status scan_rows(const sx_collection *c,
                           const sx__segment *s,
                           size_t f,
                           const scorer *so,
                           seg_ctx *sc,
                           const qterm *q,
                           size_t nq_terms,
                           float drop_build,
                           uint32_t *ri,
                           float *rv,
                           float *rt,
                           size_t cap,
                           heap *hp)
{
    for (size_t r = 0; r < sc->n; r++) {
        if ((r % DEADLINE_ROWS) == 0 && sx__deadline_check_ambient() != SX_OK)
            return SX_ETIMEDOUT;
        if (!allowed(sc, (uint32_t)r))
            continue;
        const char *t = row_text(s, f, r);
        if (!t || !*t)
            continue;
        size_t k = 0;
        if (text_entries(t) > cap)
            return sx__err(SX_ECORRUPT, "sparse field %s: row %zu of segment %llu is too long",
                           c->names[f], r, (unsigned long long)s->id);
        sx_status st = sx_sparse_parse(t, ri, rv, cap, &k);
        if (st != SX_OK)
            return sx__err(SX_ECORRUPT, "sparse field %s, segment %llu row %zu: %s", c->names[f],
                           (unsigned long long)s->id, r, sx_errmsg());
        double dl = 0; /* as the index keeps it: a float */
        for (size_t e = 0; e < k; e++)
            dl += (double)rv[e];
        dl = (double)(float)dl;
        if (drop_build > 0)
            k = apply_drop(ri, rv, k, drop_build, rt);
        double score = 0;
        bool any = false;
        for (size_t a = 0, b = 0; a < nq_terms && b < k;) {
            if (q[a].term < ri[b]) {
                a++;
            } else if (q[a].term > ri[b]) {
                b++;
            } else {
                score += contrib(so, q[a].w, (double)rv[b], dl);
                any = true;
                a++;
                b++;
            }
        }
        sc->scored++;
        if (any)
            heap_push(hp, (hit){ score, sc->seg_i, (uint32_t)r });
    }
    return SX_OK;
}

/* The slot of term t in ix (its posting list is [start[slot], start[slot + 1])), SIZE_MAX when
 * the segment lacks it. */
static size_t ix_slot(const sx__sparse_ix *ix, uint32_t t)
{
    size_t a = 0, b = ix->n_terms;
    while (a < b) {
        size_t m = a + (b - a) / 2;
        if (ix->terms[m] < t)
            a = m + 1;
        else
            b = m;
    }
    return a < ix->n_terms && ix->terms[a] == t ? a : SIZE_MAX;
}

typedef struct cursor {
    size_t qi; /* the query term's position (canonical order) */
    double w;  /* its weight */
    double ub; /* w * max value of the list */
    uint64_t at, end;
} cursor;

static int cursor_ub_cmp(const void *a, const void *b)
{
    const cursor *x = a, *y = b;
    return x->ub < y->ub ? -1 : x->ub > y->ub ? 1 : (x->qi > y->qi) - (x->qi < y->qi);
}

/* Exhaustive: every posting of the query's terms into a dense accumulator (term at a time, terms
 * in canonical order, so each row's sum runs in index order), then every touched allowed row is
 * offered. */
static sx_status ix_exhaustive(
    const sx__sparse_ix *ix, const scorer *so, seg_ctx *sc, const qterm *q, size_t nqt, heap *hp)
{
    double *acc = sx__calloc(sc->n ? sc->n : 1, sizeof *acc);
    uint64_t *touched = sx__calloc(sx__bits_words(sc->n) + 1, sizeof *touched);
    if (!acc || !touched) {
        sx__free(acc);
        sx__free(touched);
        return sx__err(SX_ENOMEM, "sparse search of %zu rows", sc->n);
    }
    for (size_t i = 0; i < nqt; i++) {
        size_t t = ix_slot(ix, q[i].term);
        if (t == SIZE_MAX)
            continue;
        for (uint64_t p = ix->start[t]; p < ix->start[t + 1]; p++) {
            uint32_t r = ix->rows[p];
            if (r >= sc->n)
                break; /* rows ascending: the rest are past the view */
            acc[r] += contrib(so, q[i].w, (double)ix->vals[p], (double)ix->doc_len[r]);
            sx__bits_set(touched, r);
        }
    }
    sx_status st = SX_OK;
    for (size_t r = 0; r < sc->n; r++) {
        if ((r % ((size_t)DEADLINE_ROWS * 64)) == 0 && (st = sx__deadline_check_ambient()) != SX_OK)
            break;
        if (!sx__bits_test(touched, r) || !allowed(sc, (uint32_t)r))
            continue;
        sc->scored++;
        heap_push(hp, (hit){ acc[r], sc->seg_i, (uint32_t)r });
    }
    sx__free(acc);
    sx__free(touched);
    return st;
}

/* The first position in [at, end) of list c whose row is >= row (galloping then binary). */
static uint64_t seek(const sx__sparse_ix *ix, uint64_t at, uint64_t end, uint32_t row)
{
    uint64_t step = 1, lo = at;
    while (lo + step < end && ix->rows[lo + step] < row) {
        lo += step;
        step *= 2;
    }
    uint64_t hi = lo + step < end ? lo + step + 1 : end;
    while (lo < hi) {
        uint64_t m = lo + (hi - lo) / 2;
        if (ix->rows[m] < row)
            lo = m + 1;
        else
            hi = m;
    }
    return lo;
}

/* MaxScore, document at a time. contrib: nqt doubles of scratch. */
static sx_status ix_maxscore(const sx__sparse_ix *ix,
                             const scorer *so,
                             seg_ctx *sc,
                             const qterm *q,
                             size_t nqt,
                             double *parts,
                             cursor *cur,
                             double *prefix,
                             heap *hp)
{
    size_t nc = 0;
    for (size_t i = 0; i < nqt; i++) {
        size_t t = ix_slot(ix, q[i].term);
        if (t == SIZE_MAX)
            continue;
        cur[nc++] = (cursor){ i, q[i].w, bound(so, q[i].w, (double)ix->max_val[t]), ix->start[t],
                              ix->start[t + 1] };
    }
    if (nc == 0)
        return SX_OK;
    qsort(cur, nc, sizeof *cur, cursor_ub_cmp); /* ascending upper bounds */
    prefix[0] = 0;
    for (size_t i = 0; i < nc; i++)
        prefix[i + 1] = prefix[i] + cur[i].ub;
    for (size_t i = 0; i < nqt; i++)
        parts[i] = 0;
    size_t ne = 0; /* cur[0, ne) are non-essential */
    uint64_t steps = 0;
    for (;;) {
        double bar = heap_bar(hp);
        double slack = SLACK * (fabs(bar) + 1e-30);
        while (ne < nc && prefix[ne + 1] < bar - slack)
            ne++;
        if (ne == nc)
            break; /* no row can beat the bar any more */
        /* the next candidate: the smallest current row among the essential lists */
        uint32_t row = UINT32_MAX;
        for (size_t i = ne; i < nc; i++)
            if (cur[i].at < cur[i].end && ix->rows[cur[i].at] < row)
                row = ix->rows[cur[i].at];
        if (row == UINT32_MAX || row >= sc->n)
            break;
        if ((++steps % DEADLINE_ROWS) == 0 && sx__deadline_check_ambient() != SX_OK)
            return SX_ETIMEDOUT;
        double part = 0;
        for (size_t i = ne; i < nc; i++) {
            if (cur[i].at < cur[i].end && ix->rows[cur[i].at] == row) {
                double x =
                    contrib(so, cur[i].w, (double)ix->vals[cur[i].at], (double)ix->doc_len[row]);
                parts[cur[i].qi] = x;
                part += x;
                cur[i].at++;
            }
        }
        bool ok = allowed(sc, row);
        /* non-essential terms, largest bound first, while the row can still win */
        for (size_t i = ne; ok && i-- > 0;) {
            if (part + prefix[i + 1] < bar - slack) {
                ok = false;
                break;
            }
            cur[i].at = seek(ix, cur[i].at, cur[i].end, row);
            if (cur[i].at < cur[i].end && ix->rows[cur[i].at] == row) {
                double x =
                    contrib(so, cur[i].w, (double)ix->vals[cur[i].at], (double)ix->doc_len[row]);
                parts[cur[i].qi] = x;
                part += x;
            }
        }
        if (ok) {
            double score = 0; /* canonical order */
            for (size_t i = 0; i < nqt; i++)
                score += parts[i];
            sc->scored++;
            heap_push(hp, (hit){ score, sc->seg_i, row });
        }
        for (size_t i = 0; i < nc; i++)
            parts[cur[i].qi] = 0;
    }
    return SX_OK;
}

/* ---------------------------------------------------------------- the search */

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static sx_status check_req(const sx_collection *c, const sx_sparse_req *req, size_t *field)
{
    if (!req || !req->field)
        return sx__err(SX_EINVAL, "sparse search: no field");
    size_t f = 0;
    while (f < c->n_fields && strcmp(c->names[f], req->field) != 0)
        f++;
    if (f == c->n_fields)
        return sx__err(SX_EINVAL, "sparse search: no field \"%s\"", req->field);
    if (c->types[f] != SX_FIELD_VARCHAR)
        return sx__err(SX_EINVAL, "sparse search: field \"%s\" is not a VARCHAR field", req->field);
    if (req->nq == 0 || !req->queries)
        return sx__err(SX_EINVAL, "sparse search needs at least one query");
    if (req->nq > 65536)
        return sx__err(SX_EINVAL, "nq %zu is over the limit of 65536", req->nq);
    if (req->k == 0 || req->k > SX_MAX_TOPK || req->offset > SX_MAX_TOPK - req->k)
        return sx__err(SX_EINVAL, "limit %u + offset %u must be in [1, %u]", req->k, req->offset,
                       SX_MAX_TOPK);
    if (req->scoring != SX_SPARSE_IP && req->scoring != SX_SPARSE_BM25)
        return sx__err(SX_EINVAL, "sparse search: unknown scoring %d", (int)req->scoring);
    if (req->scoring == SX_SPARSE_BM25 &&
        (req->drop_ratio_build != 0 || !(req->bm25_k1 >= 0 && req->bm25_k1 <= 1000) ||
         !(req->bm25_b >= 0 && req->bm25_b <= 1)))
        return sx__err(SX_EINVAL,
                       "BM25: k1 must be in (0, 1000] (0: 1.2), b in [0, 1], drop_ratio_build 0 "
                       "(k1 %g, b %g, drop_ratio_build %g)",
                       (double)req->bm25_k1, (double)req->bm25_b, (double)req->drop_ratio_build);
    if (!(req->drop_ratio_search >= 0 && req->drop_ratio_search < 1) ||
        !(req->drop_ratio_build >= 0 && req->drop_ratio_build < 1))
        return sx__err(SX_EINVAL, "drop ratios must be in [0, 1) (search %g, build %g)",
                       (double)req->drop_ratio_search, (double)req->drop_ratio_build);
    for (size_t q = 0; q < req->nq; q++) {
        const sx_sparse_query *x = &req->queries[q];
        if (x->nnz && (!x->idx || !x->val))
            return sx__err(SX_EINVAL, "sparse query %zu has no arrays", q);
        for (size_t i = 0; i < x->nnz; i++) {
            if (x->idx[i] == UINT32_MAX || (i > 0 && x->idx[i] <= x->idx[i - 1]))
                return sx__err(SX_EINVAL,
                               "sparse query %zu: indexes must increase and stay below 2^32 - 1 "
                               "(entry %zu)",
                               q, i);
            if (!isfinite(x->val[i]) || x->val[i] < 0)
                return sx__err(SX_EINVAL, "sparse query %zu: value %zu is negative or not finite",
                               q, i);
        }
    }
    *field = f;
    return SX_OK;
}

/* Takes deleted row r of a sealed segment out of the document frequencies df[] of terms[] (its
 * text parsed into *ri / *rv, grown to *cap as needed). */
static sx_status take_out_row(const sx_collection *c,
                              const sx__segment *s,
                              size_t f,
                              size_t r,
                              const uint32_t *terms,
                              size_t n_terms,
                              double *df,
                              uint32_t **ri,
                              float **rv,
                              size_t *cap)
{
    const char *t = row_text(s, f, r);
    size_t e = text_entries(t), k = 0;
    if (e == 0)
        return SX_OK;
    if (e > *cap) {
        sx__free(*ri);
        sx__free(*rv);
        *ri = sx__malloc(e * sizeof **ri);
        *rv = sx__malloc(e * sizeof **rv);
        *cap = *ri && *rv ? e : 0;
        if (!*cap)
            return sx__err(SX_ENOMEM, "BM25 statistics");
    }
    if (sx_sparse_parse(t, *ri, *rv, *cap, &k) != SX_OK)
        return sx__err(SX_ECORRUPT, "sparse field %s, segment %llu row %zu: %s", c->names[f],
                       (unsigned long long)s->id, r, sx_errmsg());
    for (size_t a = 0, b = 0; a < n_terms && b < k;) { /* both ascending */
        if (terms[a] < (*ri)[b]) {
            a++;
        } else if (terms[a] > (*ri)[b]) {
            b++;
        } else {
            df[a] -= 1;
            a++;
            b++;
        }
    }
    return SX_OK;
}

/* BM25's statistics over the live rows of the view's segments (the first rows[i] rows of each,
 * the growing one with all its visible rows whatever ignore_growing says): *n_docs, *sum_len,
 * and df[u] for each term terms[u] (ascending, distinct). Sealed segments through their index
 * (built here when missing), the growing rows parsed. */
static sx_status bm25_stats(const sx_collection *c,
                            const sx__view *v,
                            const size_t *rows,
                            size_t f,
                            const uint32_t *terms,
                            size_t n_terms,
                            double *n_docs,
                            double *sum_len,
                            double *df)
{
    *n_docs = 0;
    *sum_len = 0;
    for (size_t u = 0; u < n_terms; u++)
        df[u] = 0;
    sx_status st = SX_OK;
    uint32_t *ri = NULL;
    float *rv = NULL;
    size_t cap = 0;
    for (size_t i = 0; st == SX_OK && i < v->n; i++) {
        sx__segment *s = v->segs[i];
        size_t n = rows[i];
        if (n == 0)
            continue;
        const uint64_t *del = s->deleted;
        if (s->sealed) {
            sx__sparse_ix *ix = NULL;
            st = ix_get(c, s, f, n, 0.0f, &ix);
            if (st != SX_OK)
                break;
            /* every row's counts from the lists, then the deleted rows taken out one by one
             * (their text parsed: deletes are few next to the rows a frequent term has) */
            double len = ix->sum_len, live = (double)n;
            for (size_t u = 0; u < n_terms; u++) {
                size_t t = ix_slot(ix, terms[u]);
                if (t != SIZE_MAX)
                    df[u] += (double)(ix->start[t + 1] - ix->start[t]);
            }
            for (size_t w = 0;
                 st == SX_OK && atomic_load(&s->n_deleted) > 0 && w < sx__bits_words(n); w++) {
                uint64_t x = __atomic_load_n(&del[w], __ATOMIC_RELAXED);
                while (x && st == SX_OK) {
                    size_t r = w * 64 + (size_t)__builtin_ctzll(x);
                    x &= x - 1;
                    if (r >= n)
                        break;
                    live -= 1;
                    len -= (double)ix->doc_len[r];
                    st = take_out_row(c, s, f, r, terms, n_terms, df, &ri, &rv, &cap);
                }
            }
            *n_docs += live;
            *sum_len += len;
            continue;
        }
        size_t need = 0;
        for (size_t r = 0; r < n; r++) {
            size_t e = text_entries(row_text(s, f, r));
            need = e > need ? e : need;
        }
        if (need > cap || !ri || !rv) {
            sx__free(ri);
            sx__free(rv);
            cap = need ? need : 1;
            ri = sx__malloc(cap * sizeof *ri);
            rv = sx__malloc(cap * sizeof *rv);
            if (!ri || !rv) {
                st = sx__err(SX_ENOMEM, "BM25 statistics");
                break;
            }
        }
        for (size_t r = 0; st == SX_OK && r < n; r++) {
            if (sx__bits_test_atomic(del, r))
                continue;
            *n_docs += 1;
            const char *t = row_text(s, f, r);
            size_t k = 0;
            if (!t || !*t)
                continue;
            if (sx_sparse_parse(t, ri, rv, cap, &k) != SX_OK) {
                st = sx__err(SX_ECORRUPT, "sparse field %s, segment %llu row %zu: %s", c->names[f],
                             (unsigned long long)s->id, r, sx_errmsg());
                break;
            }
            double len = 0;
            for (size_t e = 0; e < k; e++)
                len += (double)rv[e];
            *sum_len += (double)(float)len;
            for (size_t a = 0, b = 0; a < n_terms && b < k;) {
                if (terms[a] < ri[b]) {
                    a++;
                } else if (terms[a] > ri[b]) {
                    b++;
                } else {
                    df[a] += 1;
                    a++;
                    b++;
                }
            }
        }
    }
    sx__free(ri);
    sx__free(rv);
    return st;
}

/* The longest row text of the view's growing rows, in entries (for the scan's scratch). */
static size_t longest_row(const sx__segment *s, size_t f, size_t n)
{
    size_t m = 0;
    for (size_t r = 0; r < n; r++) {
        size_t e = text_entries(row_text(s, f, r));
        if (e > m)
            m = e;
    }
    return m;
}

/* BM25: the statistics of every query term at once (bm25_stats), then each query term's weight
 * becomes the query's count x its idf, and so->avgdl the mean document length. */
static sx_status bm25_weigh(const sx_collection *c,
                            const sx__view *v,
                            const size_t *all_rows,
                            size_t f,
                            qterm *qt,
                            const size_t *nqt,
                            size_t nq,
                            size_t max_q,
                            scorer *so)
{
    size_t nu = 0;
    for (size_t q = 0; q < nq; q++)
        nu += nqt[q];
    uint32_t *uterms = sx__malloc((nu ? nu : 1) * sizeof *uterms);
    double *udf = sx__malloc((nu ? nu : 1) * sizeof *udf);
    if (!uterms || !udf) {
        sx__free(uterms);
        sx__free(udf);
        return sx__err(SX_ENOMEM, "sparse search");
    }
    nu = 0;
    for (size_t q = 0; q < nq; q++)
        for (size_t i = 0; i < nqt[q]; i++)
            uterms[nu++] = qt[q * max_q + i].term;
    qsort(uterms, nu, sizeof *uterms, cmp_u32);
    size_t nd = 0;
    for (size_t i = 0; i < nu; i++)
        if (nd == 0 || uterms[i] != uterms[nd - 1])
            uterms[nd++] = uterms[i];
    double n_docs = 0, sum_len = 0;
    sx_status st = bm25_stats(c, v, all_rows, f, uterms, nd, &n_docs, &sum_len, udf);
    if (st == SX_OK) {
        so->avgdl = n_docs > 0 && sum_len > 0 ? sum_len / n_docs : 1.0;
        for (size_t q = 0; q < nq; q++)
            for (size_t i = 0; i < nqt[q]; i++) {
                qterm *x = &qt[q * max_q + i];
                const uint32_t *t = bsearch(&x->term, uterms, nd, sizeof *uterms, cmp_u32);
                double df = t ? udf[t - uterms] : 0;
                x->w *= log(1 + (n_docs - df + 0.5) / (df + 0.5));
            }
    }
    sx__free(uterms);
    sx__free(udf);
    return st;
}

static sx_status search_impl(sx_collection *c, const sx_sparse_req *req, sx_rowset **out)
{
    if (sx__deadline_check_ambient() != SX_OK)
        return SX_ETIMEDOUT;
    size_t f = 0;
    sx_status st = check_req(c, req, &f);
    if (st != SX_OK)
        return st;
    sx__expr *e = NULL;
    st = sx__parse_filter(c, req->filter, &e);
    if (st != SX_OK)
        return st;
    size_t nq = req->nq, kk = (size_t)req->k + req->offset, max_q = 0;
    for (size_t q = 0; q < nq; q++)
        if (req->queries[q].nnz > max_q)
            max_q = req->queries[q].nnz;
    sx__view v;
    st = sx__view_get(c, &v);
    if (st != SX_OK) {
        sx__expr_free(e);
        return st;
    }
    size_t *all_rows = sx__malloc(v.n * sizeof *all_rows); /* before ignore_growing: BM25 */
    if (all_rows)
        memcpy(all_rows, v.rows, v.n * sizeof *all_rows);
    if (req->ignore_growing)
        v.rows[v.n - 1] = 0;
    scorer so = { req->scoring, req->bm25_k1 > 0 ? (double)req->bm25_k1 : 1.2, (double)req->bm25_b,
                  1.0 };
    heap *heaps = sx__calloc(nq, sizeof *heaps);
    qterm *qt = sx__malloc(nq * (max_q ? max_q : 1) * sizeof *qt);
    size_t *nqt = sx__calloc(nq, sizeof *nqt);
    double *parts = sx__malloc((max_q ? max_q : 1) * sizeof *parts);
    cursor *cur = sx__malloc((max_q ? max_q : 1) * sizeof *cur);
    double *prefix = sx__malloc((max_q + 1) * sizeof *prefix);
    uint32_t *qi_tmp = sx__malloc((max_q ? max_q : 1) * sizeof *qi_tmp);
    float *qv_tmp = sx__malloc((max_q ? max_q : 1) * 2 * sizeof *qv_tmp);
    uint32_t *ri = NULL;
    float *rv = NULL, *rt = NULL;
    sx__rowref *refs = NULL;
    float *dists = NULL;
    size_t *topks = NULL;
    uint64_t **allows = sx__calloc(v.n, sizeof *allows);
    if (!heaps || !qt || !nqt || !parts || !cur || !prefix || !qi_tmp || !qv_tmp || !allows ||
        !all_rows) {
        st = sx__err(SX_ENOMEM, "sparse search");
        goto out;
    }
    for (size_t q = 0; q < nq; q++) {
        heaps[q].h = sx__malloc(kk * sizeof(hit));
        heaps[q].cap = kk;
        if (!heaps[q].h) {
            st = sx__err(SX_ENOMEM, "sparse search: %zu queries x %zu hits", nq, kk);
            goto out;
        }
        /* the query's terms after drop_ratio_search, in index (canonical) order */
        const sx_sparse_query *x = &req->queries[q];
        memcpy(qi_tmp, x->idx, x->nnz * sizeof *qi_tmp);
        memcpy(qv_tmp, x->val, x->nnz * sizeof *qv_tmp);
        size_t k = x->nnz;
        if (req->drop_ratio_search > 0)
            k = apply_drop(qi_tmp, qv_tmp, k, req->drop_ratio_search, qv_tmp + max_q);
        for (size_t i = 0; i < k; i++)
            qt[q * max_q + nqt[q]++] = (qterm){ qi_tmp[i], (double)qv_tmp[i] };
    }
    if (so.mode == SX_SPARSE_BM25) {
        st = bm25_weigh(c, &v, all_rows, f, qt, nqt, nq, max_q, &so);
        if (st != SX_OK)
            goto out;
    }
    /* each segment: its allow bits (filter and deletes), then every query */
    for (uint32_t i = 0; st == SX_OK && i < v.n; i++) {
        size_t n = v.rows[i];
        if (n == 0)
            continue;
        st = sx__deadline_check_ambient();
        if (st != SX_OK)
            break;
        size_t n_allowed = n;
        if (e || atomic_load(&v.segs[i]->n_deleted) > 0) {
            st = sx__view_allow(c, &v, i, e, &allows[i], &n_allowed);
            if (st != SX_OK)
                break;
        }
        if (n_allowed == 0)
            continue;
        sx__segment *s = v.segs[i];
        seg_ctx sc = { i, allows[i], n, 0 };
        if (!s->sealed) {
            size_t cap = longest_row(s, f, n);
            sx__free(ri);
            sx__free(rv);
            sx__free(rt);
            ri = sx__malloc((cap ? cap : 1) * sizeof *ri);
            rv = sx__malloc((cap ? cap : 1) * sizeof *rv);
            rt = sx__malloc((cap ? cap : 1) * sizeof *rt);
            if (!ri || !rv || !rt) {
                st = sx__err(SX_ENOMEM, "sparse search");
                break;
            }
            for (size_t q = 0; st == SX_OK && q < nq; q++)
                st = scan_rows(c, s, f, &so, &sc, qt + q * max_q, nqt[q], req->drop_ratio_build, ri,
                               rv, rt, cap, &heaps[q]);
            continue;
        }
        sx__sparse_ix *ix = NULL;
        st = ix_get(c, s, f, n, req->drop_ratio_build, &ix);
        if (st != SX_OK)
            break;
        for (size_t q = 0; st == SX_OK && q < nq; q++)
            st = req->exhaustive ? ix_exhaustive(ix, &so, &sc, qt + q * max_q, nqt[q], &heaps[q])
                                 : ix_maxscore(ix, &so, &sc, qt + q * max_q, nqt[q], parts, cur,
                                               prefix, &heaps[q]);
    }
    if (st != SX_OK)
        goto out;
    /* the answer: per query its hits best first, after `offset` */
    topks = sx__calloc(nq, sizeof *topks);
    refs = sx__malloc(nq * req->k * sizeof *refs + 1);
    dists = sx__malloc(nq * req->k * sizeof *dists + 1);
    if (!topks || !refs || !dists) {
        st = sx__err(SX_ENOMEM, "sparse search");
        goto out;
    }
    size_t total = 0;
    for (size_t q = 0; q < nq; q++) {
        qsort(heaps[q].h, heaps[q].n, sizeof(hit), hit_cmp);
        for (size_t h = req->offset; h < heaps[q].n; h++) {
            refs[total] = (sx__rowref){ heaps[q].h[h].seg, heaps[q].h[h].row };
            dists[total] = (float)heaps[q].h[h].score;
            total++;
            topks[q]++;
        }
    }
    st = sx__search_rowset(c, &v, refs, total, req->output_fields, req->n_output_fields, nq, &topks,
                           &dists, out);
out:
    for (size_t i = 0; allows && i < v.n; i++)
        sx__free(allows[i]);
    sx__free(allows);
    for (size_t q = 0; heaps && q < nq; q++)
        sx__free(heaps[q].h);
    sx__free(heaps);
    sx__free(qt);
    sx__free(nqt);
    sx__free(parts);
    sx__free(cur);
    sx__free(prefix);
    sx__free(qi_tmp);
    sx__free(qv_tmp);
    sx__free(ri);
    sx__free(rv);
    sx__free(rt);
    sx__free(refs);
    sx__free(dists);
    sx__free(topks);
    sx__free(all_rows);
    sx__view_release(&v);
    sx__expr_free(e);
    return st;
}

sx_status sx_sparse_search(sx_collection *c, const sx_sparse_req *req, sx_rowset **out)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx_status st = search_impl(c, req, out);
    sx_io_phase_set(prev);
    return st;
}
