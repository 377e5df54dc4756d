/*
 * query.c: search, query, get, count, and result rowsets.
 *
 * Search over a read view: each segment is searched with its index when it has one and the filter
 * keeps enough rows; otherwise exactly (FLAT scan: SIMD per row for few queries, BLAS GEMM for
 * batches). The filter + delete bitmap of a segment is computed once per call and shared by all
 * queries. Low selectivity switches to exact search: when fewer than SX__EXACT_MAX_ROWS rows or
 * under SX__EXACT_FRACTION of the segment pass the filter, graph traversal would wander through
 * mostly filtered-out nodes, and an exact scan of the survivors is both cheaper and exact.
 * Per-segment top-(k+offset) lists are merged per query; hits are sorted by distance, then by
 * segment order and row so results are deterministic.
 * Batches of queries on indexed segments are split across threads (search_threads).
 *
 * Search parameters are checked up front against the collection's index type (its spec, not the
 * segments that happen to have been built), for every search: otherwise a bad "ef" would pass
 * while every row is still growing (searched exactly, no index consulted) and fail once the rows
 * are sealed and indexed, so one request would flip from success to error as data ages. Without
 * an index spec the parameters are not interpreted (exact search takes none) and not checked.
 *
 * Memory. A search charges its scratch to the database's budget (SX__MEM_SCRATCH) for its
 * duration, before it allocates: the query copy, the per-segment candidate lists (nq x segments
 * x (k + offset)), the filter bitset of the largest segment, the merged answer and its rowset
 * (ids, distances, the output fields at their fixed widths), and per search thread an estimate of
 * the index's own scratch (a visited bitset of the largest segment and 64 KiB of lists). A search
 * that would take the budget past its limit is refused with SX_ENOMEM naming the budget (a
 * batch of 65,536 queries at k = 16,384 asks for gigabytes), never OOM-killed. Scratch up to
 * SX__SCRATCH_ALWAYS is charged without the check: an ordinary query is always answered, even
 * when what must be held (indexes, forced) already takes the budget past its limit; the
 * headroom between the budget and the cgroup's limit covers it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "index/flat/flat.h"
#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/assert.h"
#include "util/bitset.h"
#include "util/deadline.h"
#include "util/err.h"
#include "vector/dist.h"

#define SX__EXACT_MAX_ROWS      2048
#define SX__EXACT_FRACTION      0.05
/* The cost of one distance the index's filtered search computes (a gathered row: a random
 * access, visited and heap work) in rows of an exact scan of the rows the filter keeps
 * (sequential, prefetched, one pass over the allow bits): SX__PLAN_GATHER_FIXED / dim +
 * SX__PLAN_GATHER_PER_DIM. Measured with each plan forced on the same HNSW graphs (M=16, one
 * thread, docs/internals/SEARCH-SPEED.md): a scanned row costs 0.15 ns per dimension (17.6 ns
 * at 128, 115 ns at 784); a gathered one about 24 ns + 0.52 ns per dimension (0.08-0.10 us
 * at 128, 0.40-0.58 us at 784): 4.4-5.8 rows at 128 and 3.7 at 784. */
#define SX__PLAN_GATHER_FIXED   160.0
#define SX__PLAN_GATHER_PER_DIM 3.5

typedef enum { PLAN_INDEX, PLAN_EXACT_FILTERED, PLAN_EXACT_OTHER } seg_plan;

/* The plan of a filtered search over an indexed segment of n rows of which the filter and the
 * deletes keep n_allowed: an exact scan of those rows costs about n_allowed row distances (and
 * a pass over the n-bit allow set, 1/64 per row); the index's filtered search costs what its
 * filter_cost estimates, each distance worth `gather` scanned rows (above). The cheaper wins.
 * An index without an estimate keeps the fixed rule: exact below SX__EXACT_MAX_ROWS rows or
 * SX__EXACT_FRACTION of the segment. req->filter_plan overrides (SX_PLAN_INDEX, SX_PLAN_EXACT). */
static seg_plan plan_segment(const sx__idxref *ix,
                             const sx_search_req *req,
                             size_t kk,
                             size_t dim,
                             size_t n,
                             size_t n_allowed)
{
    if (req->filter_plan == SX_PLAN_INDEX)
        return PLAN_INDEX;
    if (req->filter_plan == SX_PLAN_EXACT)
        return PLAN_EXACT_FILTERED;
    double est = ix->ops->filter_cost
                     ? ix->ops->filter_cost(ix->idx, req->params, req->n_params, kk, n_allowed)
                     : -1.0;
    if (est < 0)
        return n_allowed < SX__EXACT_MAX_ROWS || (double)n_allowed < SX__EXACT_FRACTION * (double)n
                   ? PLAN_EXACT_FILTERED
                   : PLAN_INDEX;
    double exact = (double)n_allowed + (double)n / 64.0;
    double gather = SX__PLAN_GATHER_FIXED / (double)(dim ? dim : 1) + SX__PLAN_GATHER_PER_DIM;
    return exact <= gather * est ? PLAN_EXACT_FILTERED : PLAN_INDEX;
}

#define SX__DEADLINE_SCAN_ROWS 1024 /* exact-scan rows between two deadline checks */

typedef struct cand {
    float dist;
    uint32_t seg;
    uint32_t row;
} cand;

static int cand_cmp(const void *a, const void *b)
{
    const cand *x = a, *y = b;
    if (x->dist != y->dist)
        return x->dist < y->dist ? -1 : 1;
    if (x->seg != y->seg)
        return x->seg < y->seg ? -1 : 1;
    return x->row < y->row ? -1 : (x->row > y->row);
}

/* ---------------------------------------------------------------- rowsets */

typedef sx__rowref rowref;

void sx_rowset_free(sx_rowset *rs)
{
    if (!rs)
        return;
    for (size_t i = 0; i < rs->n_cols; i++) {
        if (rs->cols[i].type == SX_FIELD_VARCHAR && rs->cols[i].data) {
            char **s = (char **)rs->cols[i].data;
            for (size_t r = 0; r < rs->n_rows; r++)
                sx__free(s[r]);
        }
        sx__free((void *)rs->cols[i].data);
        sx__free((void *)rs->cols[i].valid);
        sx__free((char *)rs->cols[i].name);
    }
    sx__free(rs->cols);
    sx__free(rs->dims);
    sx__free(rs->topks);
    sx__free(rs->distances);
    sx__free(rs);
}

/* Resolves output field names to field indexes: pk first, then the requested ones. */
sx_status
sx__resolve_fields(sx_collection *c, const char *const *names, size_t n, size_t *out, size_t *n_out)
{
    size_t k = 0;
    out[k++] = c->pk;
    for (size_t i = 0; i < n; i++) {
        if (!names[i])
            return sx__err(SX_EINVAL, "output field %zu is NULL", i);
        if (strcmp(names[i], "*") == 0) {
            for (size_t f = 0; f < c->n_fields; f++) {
                bool have = false;
                for (size_t j = 0; j < k; j++)
                    have |= out[j] == f;
                if (!have)
                    out[k++] = f;
            }
            continue;
        }
        size_t f = 0;
        while (f < c->n_fields && strcmp(c->names[f], names[i]) != 0)
            f++;
        if (f == c->n_fields)
            return sx__err(SX_EINVAL, "output field \"%s\" not found", names[i]);
        bool have = false;
        for (size_t j = 0; j < k; j++)
            have |= out[j] == f;
        if (!have)
            out[k++] = f;
    }
    *n_out = k;
    return SX_OK;
}

sx_status sx__build_rowset(sx_collection *c,
                           const sx__view *v,
                           const rowref *refs,
                           size_t n,
                           const size_t *fields,
                           size_t n_fields,
                           sx_rowset **out)
{
    sx_rowset *rs = sx__calloc(1, sizeof *rs);
    if (!rs)
        return sx__err(SX_ENOMEM, "result");
    rs->n_rows = n;
    rs->cols = sx__calloc(n_fields, sizeof(sx_column));
    rs->dims = sx__calloc(n_fields, sizeof(uint32_t));
    if (!rs->cols || !rs->dims)
        goto nomem;
    for (size_t i = 0; i < n_fields; i++) {
        size_t f = fields[i];
        size_t w = sx__field_width(c, f);
        rs->cols[i].name = sx__strdup(c->names[f]);
        rs->cols[i].type = c->types[f];
        rs->n_cols = i + 1;
        rs->dims[i] = sx_field_is_vector(c->types[f]) ? c->fields[f].dim : 0;
        char *data = sx__calloc(n ? n : 1, w);
        rs->cols[i].data = data;
        if (!data || !rs->cols[i].name)
            goto nomem;
        for (size_t r = 0; r < n; r++) {
            const sx__segment *s = v->segs[refs[r].seg];
            const void *cell = sx__seg_cell(s, f, refs[r].row, w);
            if (c->types[f] == SX_FIELD_VARCHAR) {
                char *copy = sx__strdup(*(char *const *)cell);
                if (!copy)
                    goto nomem;
                ((char **)data)[r] = copy;
            } else {
                memcpy(data + r * w, cell, w);
            }
        }
        if (!c->fields[f].nullable)
            continue;
        bool *valid = NULL; /* only when a row is NULL */
        for (size_t r = 0; r < n; r++) {
            if (!sx__seg_is_null(v->segs[refs[r].seg], f, refs[r].row))
                continue;
            if (!valid) {
                valid = sx__malloc(n);
                if (!valid)
                    goto nomem;
                memset(valid, 1, n);
                rs->cols[i].valid = valid;
            }
            valid[r] = false;
        }
    }
    *out = rs;
    return SX_OK;
nomem:
    sx_rowset_free(rs);
    return sx__err(SX_ENOMEM, "result");
}

sx_status sx__parse_filter(sx_collection *c, const char *filter, sx__expr **e)
{
    *e = NULL;
    if (!filter)
        return SX_OK;
    const char *p = filter;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (!*p)
        return SX_OK;
    return sx__expr_parse(filter, &c->xschema, e);
}

sx_status sx__search_rowset(sx_collection *c,
                            const sx__view *v,
                            const rowref *refs,
                            size_t n,
                            const char *const *output_fields,
                            size_t n_output_fields,
                            size_t nq,
                            size_t **topks,
                            float **dists,
                            sx_rowset **out)
{
    size_t fields[SX_MAX_FIELDS * 2];
    size_t n_fields = 0;
    sx_status st = sx__resolve_fields(c, output_fields, n_output_fields, fields, &n_fields);
    sx_rowset *rs = NULL;
    if (st == SX_OK)
        st = sx__build_rowset(c, v, refs, n, fields, n_fields, &rs);
    if (st != SX_OK)
        return st;
    rs->nq = nq;
    rs->topks = *topks;
    rs->distances = *dists;
    *topks = NULL;
    *dists = NULL;
    *out = rs;
    return SX_OK;
}

/* ---------------------------------------------------------------- search */

typedef struct search_job {
    const sx__idxref *idx;
    const void *queries; /* float32 queries, or packed binary ones (typed) */
    size_t qbytes;       /* bytes of one query */
    bool typed;          /* a field that is not float32: the index's search_typed */
    size_t dim, kk, q0, q1;
    const sx_param *params;
    size_t n_params;
    const uint64_t *allow;
    uint32_t seg_i;
    cand *cands; /* per query: kk slots at q*slot_stride + *counts */
    size_t *counts;
    size_t stride;
    sx__deadline dl; /* the caller's (workers have none of their own) */
    sx_status st;
} search_job;

static void *run_index_job(void *arg)
{
    search_job *j = arg;
    /* worker threads start in OTHER: their index reads (DISKANN sectors) are QUERY I/O */
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    /* the caller's deadline, also for the checks inside the index (graph.h) */
    sx__deadline prev_dl = sx__deadline_install(j->dl);
    sx__hit *hits = sx__malloc(j->kk * sizeof *hits);
    if (!hits) {
        j->st = sx__err(SX_ENOMEM, "search");
        (void)sx__deadline_install(prev_dl);
        sx_io_phase_set(prev);
        return NULL;
    }
    for (size_t q = j->q0; q < j->q1 && j->st == SX_OK; q++) {
        j->st = sx__deadline_check(&j->dl);
        if (j->st != SX_OK)
            break;
        sx__topk t;
        sx__topk_init(&t, hits, j->kk);
        const void *qv = (const char *)j->queries + q * j->qbytes;
        if (j->typed)
            j->st = j->idx->ops->search_typed(j->idx->idx, qv, j->kk, j->params, j->n_params,
                                              j->allow, &t);
        else
            j->st =
                j->idx->ops->search(j->idx->idx, qv, j->kk, j->params, j->n_params, j->allow, &t);
        for (size_t h = 0; h < t.n; h++) {
            cand *cd = &j->cands[q * j->stride + j->counts[q]++];
            cd->dist = t.h[h].dist;
            cd->seg = j->seg_i;
            cd->row = t.h[h].id;
        }
    }
    sx__free(hits);
    (void)sx__deadline_install(prev_dl);
    sx_io_phase_set(prev);
    return NULL;
}

static sx_status search_index(sx_collection *c, search_job *base, size_t nq)
{
    uint32_t threads = c->db->opts.search_threads;
    if (threads <= 1 || nq < 16) {
        base->q0 = 0;
        base->q1 = nq;
        run_index_job(base);
        return base->st;
    }
    if (threads > 64)
        threads = 64;
    search_job jobs[64];
    pthread_t tids[64];
    bool started[64] = { false };
    for (uint32_t t = 0; t < threads; t++) {
        jobs[t] = *base;
        jobs[t].q0 = nq * t / threads;
        jobs[t].q1 = nq * (t + 1) / threads;
        started[t] = t > 0 && pthread_create(&tids[t], NULL, run_index_job, &jobs[t]) == 0;
    }
    for (uint32_t t = 0; t < threads; t++)
        if (!started[t])
            run_index_job(&jobs[t]);
    sx_status st = SX_OK;
    for (uint32_t t = 0; t < threads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        if (jobs[t].st != SX_OK && st == SX_OK)
            st = jobs[t].st;
    }
    /* a worker's message is on its own thread: say it again on the caller's */
    if (st == SX_ETIMEDOUT)
        sx__deadline_report(&base->dl);
    return st;
}

static sx_status search_exact(const sx__vfield *vf,
                              sx_metric metric,
                              const sx__view *v,
                              uint32_t i,
                              const void *queries,
                              size_t nq,
                              size_t kk,
                              const uint64_t *allow,
                              cand *cands,
                              size_t *counts,
                              size_t stride)
{
    const sx__segment *s = v->segs[i];
    size_t n = v->rows[i];
    sx__hit *store = sx__malloc(nq * kk * sizeof *store);
    sx__topk *heaps = sx__malloc(nq * sizeof *heaps);
    sx_status st = store && heaps ? SX_OK : sx__err(SX_ENOMEM, "search");
    for (size_t q = 0; st == SX_OK && q < nq; q++)
        sx__topk_init(&heaps[q], store + q * kk, kk);
    /* With a deadline, a chunk (a sealed segment is one) is scanned in blocks of
     * SX__DEADLINE_SCAN_ROWS rows with a check before each; without one, in one call as before. */
    sx__deadline dl = sx__deadline_get();
    for (size_t base = 0; st == SX_OK && base < n; base += s->chunk_rows) {
        size_t m = n - base < s->chunk_rows ? n - base : s->chunk_rows;
        const char *vecs = s->chunks[vf->field][base / s->chunk_rows];
        size_t step = dl.at_ns ? SX__DEADLINE_SCAN_ROWS : m;
        for (size_t r0 = 0; st == SX_OK && r0 < m; r0 += step) {
            size_t mr = m - r0 < step ? m - r0 : step;
            st = sx__deadline_check(&dl);
            if (st == SX_OK)
                st = sx__flat_scan_typed(vecs + r0 * vf->row_bytes, vf->vt, mr, vf->dim, metric,
                                         (uint32_t)(base + r0), allow, queries, nq, heaps);
        }
    }
    for (size_t q = 0; st == SX_OK && q < nq; q++) {
        for (size_t h = 0; h < heaps[q].n; h++) {
            cand *cd = &cands[q * stride + counts[q]++];
            cd->dist = heaps[q].h[h].dist;
            cd->seg = i;
            cd->row = heaps[q].h[h].id;
        }
    }
    sx__free(store);
    sx__free(heaps);
    return st;
}

/* Checks the request's search params against the vector field's index type `ops` (see the
 * file comment; NULL: no index); returns the checked ops in *checked (NULL without an index). */
static sx_status check_search_params(const sx__index_ops *ops,
                                     const sx_search_req *req,
                                     size_t kk,
                                     const sx__index_ops **checked)
{
    *checked = NULL;
    for (size_t i = 0; i < req->n_params; i++)
        if (!req->params || !req->params[i].key || !req->params[i].value)
            return sx__err(SX_EINVAL, "search parameter %zu has no key or value", i);
    if (!ops)
        return SX_OK;
    *checked = ops;
    return ops->check_search_params(req->params, req->n_params, kk);
}

/* The scratch one search allocates (see the note at the top), in bytes. */
#define SX__SCRATCH_ALWAYS (8u << 20)

static uint64_t search_scratch_bytes(const sx_collection *c,
                                     const sx__view *v,
                                     const sx_search_req *req,
                                     size_t nq,
                                     size_t kk,
                                     size_t dim,
                                     sx_metric metric)
{
    uint64_t rows_max = 0;
    for (size_t i = 0; i < v->n; i++)
        rows_max = v->rows[i] > rows_max ? v->rows[i] : rows_max;
    uint64_t out_row = sizeof(int64_t) + sizeof(rowref); /* the key column and the row refs */
    for (size_t f = 0; f < req->n_output_fields && req->output_fields; f++) {
        const char *name = req->output_fields[f];
        for (size_t j = 0; name && j < c->n_fields; j++)
            if (strcmp(c->names[j], name) == 0)
                out_row += sx_field_is_vector(c->types[j])
                               ? (uint64_t)sx_vector_row_bytes(c->types[j], c->fields[j].dim)
                               : sizeof(int64_t);
    }
    uint32_t threads = c->db->opts.search_threads > 1 ? c->db->opts.search_threads : 1;
    uint64_t b = (uint64_t)nq * v->n * kk * sizeof(cand) + (uint64_t)nq * 3 * sizeof(size_t) +
                 (uint64_t)nq * req->k * (out_row + sizeof(float)) + rows_max / 8 +
                 (metric == SX_METRIC_COSINE ? (uint64_t)nq * dim * sizeof(float) : 0) +
                 (uint64_t)(threads < 64 ? threads : 64) * (rows_max / 8 + (64u << 10));
    return b;
}

/* Checks the queries of a search on field vf: float32 ones (req->queries) finite and, outside
 * COSINE, within SX_MAX_SQNORM; binary ones (req->bqueries) present. */
static sx_status check_queries(const sx__vfield *vf, sx_metric metric, const sx_search_req *req)
{
    size_t nq = req->nq, dim = vf->dim;
    if (vf->vt == SX__VT_BIN) {
        if (!req->bqueries)
            return sx__err(SX_EINVAL,
                           "a BINARY_VECTOR field is searched with binary queries (bqueries: "
                           "%zu bytes each)",
                           vf->row_bytes);
        return SX_OK;
    }
    if (!req->queries)
        return sx__err(SX_EINVAL, "a %s field is searched with float32 queries",
                       sx__vtype_name(vf->vt));
    for (size_t i = 0; i < nq * dim; i++)
        if (!isfinite(req->queries[i]))
            return sx__err(SX_EINVAL, "query %zu has a NaN or infinite value", i / dim);
    double qn2;
    size_t over = sx__first_over_sqnorm(req->queries, nq, dim, &qn2);
    if (over < nq && metric != SX_METRIC_COSINE)
        return sx__err(SX_EINVAL,
                       "query %zu has squared norm %.3g, above the limit 2^125 (%.3g, "
                       "SX_MAX_SQNORM) of L2 and IP collections",
                       over, qn2, SX_MAX_SQNORM);
    return SX_OK;
}

static sx_status search_impl(sx_collection *c, const sx_search_req *req, sx_rowset **out)
{
    if (!req || (!req->queries && !req->bqueries) || req->nq == 0)
        return sx__err(SX_EINVAL, "search needs at least one query vector");
    if (sx__deadline_check_ambient() != SX_OK)
        return SX_ETIMEDOUT;
    if (req->nq > 65536)
        return sx__err(SX_EINVAL, "nq %zu is over the limit of 65536", req->nq);
    if (req->filter_plan != SX_PLAN_AUTO && req->filter_plan != SX_PLAN_INDEX &&
        req->filter_plan != SX_PLAN_EXACT)
        return sx__err(SX_EINVAL, "filter_plan %d is not SX_PLAN_AUTO, _INDEX or _EXACT",
                       req->filter_plan);
    if (req->k == 0 || req->k > SX_MAX_TOPK || req->offset > SX_MAX_TOPK - req->k)
        return sx__err(SX_EINVAL, "limit %u + offset %u must be in [1, %u]", req->k, req->offset,
                       SX_MAX_TOPK);
    size_t vi = 0;
    sx_status st = sx__vfield_find(c, req->anns_field, &vi);
    if (st != SX_OK)
        return st;
    sx_search_plan plan = { 0 };
    const sx__vfield *vf = &c->vfs[vi];
    sx__rwlock_rdlock(&c->seg_lock);
    const sx_metric metric = vf->metric;
    const sx__index_ops *spec_ops = vf->iops; /* a static vtable: valid after the unlock */
    sx__rwlock_unlock(&c->seg_lock);
    if (req->metric >= 0 && (sx_metric)req->metric != metric)
        return sx__err(SX_EINVAL, "metric type mismatch: the %s uses %s",
                       c->n_vf > 1 ? "vector field" : "collection", sx_metric_str(metric));
    size_t nq = req->nq, dim = vf->dim, kk = (size_t)req->k + req->offset;
    st = check_queries(vf, metric, req);
    if (st != SX_OK)
        return st;
    const sx__index_ops *checked = NULL;
    st = check_search_params(spec_ops, req, kk, &checked);
    if (st != SX_OK)
        return st;
    sx__expr *e = NULL;
    st = sx__parse_filter(c, req->filter, &e);
    if (st != SX_OK)
        return st;
    sx__view v;
    uint64_t scratch = 0; /* charged to the budget */
    float *qcopy = NULL;
    cand *cands = NULL;
    size_t *counts = NULL;
    rowref *refs = NULL;
    float *dists = NULL;
    size_t *topks = NULL;
    st = sx__view_get(c, &v);
    if (st != SX_OK) {
        sx__expr_free(e);
        return st;
    }
    if (req->ignore_growing)
        v.rows[v.n - 1] = 0; /* the growing segment is the view's last */
    const void *queries = vf->vt == SX__VT_BIN ? (const void *)req->bqueries : req->queries;
    const size_t qbytes = vf->vt == SX__VT_BIN ? vf->row_bytes : dim * sizeof(float);
    if (metric == SX_METRIC_COSINE && req->queries) { /* float fields (check_queries) */
        qcopy = sx__malloc(nq * dim * sizeof(float));
        if (!qcopy) {
            st = sx__err(SX_ENOMEM, "search");
            goto out;
        }
        memcpy(qcopy, req->queries, nq * dim * sizeof(float));
        for (size_t q = 0; q < nq; q++)
            sx__normalize(qcopy + q * dim, dim);
        queries = qcopy;
    }
    /* A segment may still carry an index of a spec replaced since the check (drop + create
     * racing this search): its own type checks the params too. */
    for (size_t i = 0; i < v.n; i++) {
        if (v.idx[i][vi] && v.idx[i][vi]->ops != checked) {
            checked = v.idx[i][vi]->ops;
            st = checked->check_search_params(req->params, req->n_params, kk);
            if (st != SX_OK)
                goto out;
        }
    }
    size_t stride = v.n * kk;
    scratch = search_scratch_bytes(c, &v, req, nq, kk, dim, metric);
    if (scratch <= SX__SCRATCH_ALWAYS) {
        sx__mem_force(c->db->budget, SX__MEM_SCRATCH, scratch);
    } else {
        st = sx__mem_take(c->db->budget, SX__MEM_SCRATCH, scratch, "search scratch");
        if (st != SX_OK) {
            scratch = 0;
            goto out;
        }
    }
    cands = sx__malloc(nq * stride * sizeof *cands);
    counts = sx__calloc(nq, sizeof *counts);
    if (!cands || !counts) {
        st = sx__err(SX_ENOMEM, "search: %zu queries x %zu segments x %zu hits", nq, v.n, kk);
        goto out;
    }
    for (uint32_t i = 0; st == SX_OK && i < v.n; i++) {
        size_t n = v.rows[i];
        if (n == 0)
            continue;
        st = sx__deadline_check_ambient();
        if (st != SX_OK)
            break;
        uint64_t *allow = NULL;
        size_t n_allowed = n;
        if (e || atomic_load(&v.segs[i]->n_deleted) > 0) {
            st = sx__view_allow(c, &v, i, e, &allow, &n_allowed);
            if (st != SX_OK)
                break;
        }
        plan.rows += n;
        plan.rows_kept += n_allowed;
        if (n_allowed > 0) {
            /* A FLAT index is an exact scan of the same vectors, one query at a time through
             * the vtable; the segment scan does a batch in one pass over memory (and with GEMM
             * from SX__FLAT_GEMM_MIN_NQ queries), with identical results. So batches (merged
             * REST searches included) take the segment scan. */
            const sx__idxref *ix = v.idx[i][vi];
            SX_ASSERT(!ix || ix->ops); /* a built index has its vtable */
            bool flat_batch =
                ix && nq > 1 &&
                (strcmp(ix->ops->name, "FLAT") == 0 || strcmp(ix->ops->name, "BIN_FLAT") == 0 ||
                 strcmp(ix->ops->name, "GPU_BRUTE_FORCE") == 0);
            seg_plan how = PLAN_EXACT_OTHER;
            if (ix && !flat_batch && !req->exact)
                how = allow ? plan_segment(ix, req, kk, dim, n, n_allowed) : PLAN_INDEX;
            if (how == PLAN_INDEX)
                *(allow ? &plan.index_filtered : &plan.index) += 1;
            else if (how == PLAN_EXACT_FILTERED)
                plan.exact_filtered++;
            else if (!ix)
                plan.exact_unindexed++;
            else
                plan.exact_other++;
            if (how == PLAN_INDEX) {
                search_job j = { .idx = ix,
                                 .queries = queries,
                                 .qbytes = qbytes,
                                 .typed = vf->vt != SX__VT_F32,
                                 .dim = dim,
                                 .kk = kk,
                                 .params = req->params,
                                 .n_params = req->n_params,
                                 .allow = allow,
                                 .seg_i = i,
                                 .cands = cands,
                                 .counts = counts,
                                 .stride = stride,
                                 .dl = sx__deadline_get(),
                                 .st = SX_OK };
                st = search_index(c, &j, nq);
            } else {
                st = search_exact(vf, metric, &v, i, queries, nq, kk, allow, cands, counts, stride);
            }
        }
        sx__free(allow);
    }
    if (st != SX_OK)
        goto out;
    /* merge */
    size_t total = 0;
    topks = sx__calloc(nq, sizeof *topks);
    refs = sx__malloc(nq * req->k * sizeof *refs + 1);
    dists = sx__malloc(nq * req->k * sizeof *dists + 1);
    if (!topks || !refs || !dists) {
        st = sx__err(SX_ENOMEM, "search");
        goto out;
    }
    for (size_t q = 0; q < nq; q++) {
        cand *cq = cands + q * stride;
        qsort(cq, counts[q], sizeof *cq, cand_cmp);
        for (size_t h = req->offset; h < counts[q] && h < kk; h++) {
            refs[total].seg = cq[h].seg;
            refs[total].row = cq[h].row;
            dists[total] = sx__dist_to_user(metric, cq[h].dist);
            total++;
            topks[q]++;
        }
    }
    st = sx__search_rowset(c, &v, refs, total, req->output_fields, req->n_output_fields, nq, &topks,
                           &dists, out);
    if (st == SX_OK && req->plan)
        *req->plan = plan;
out:
    sx__mem_give(c->db->budget, SX__MEM_SCRATCH, scratch);
    sx__view_release(&v);
    sx__expr_free(e);
    sx__free(qcopy);
    sx__free(cands);
    sx__free(counts);
    sx__free(refs);
    sx__free(dists);
    sx__free(topks);
    return st;
}

/* The public read entry points tag the calling thread's I/O phase QUERY for their duration and
 * restore the caller's phase on return (the bodies return from many places, so the tag wraps
 * them). */
sx_status sx_search(sx_collection *c, const sx_search_req *req, sx_rowset **out)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx_status st = search_impl(c, req, out);
    sx_io_phase_set(prev);
    return st;
}

/* ---------------------------------------------------------------- query, count, get */

static sx_status query_impl(sx_collection *c,
                            const char *filter,
                            const char *const *output_fields,
                            size_t n_output_fields,
                            uint64_t limit,
                            uint64_t offset,
                            sx_rowset **out)
{
    size_t fields[SX_MAX_FIELDS * 2];
    size_t n_fields = 0;
    sx_status st = sx__resolve_fields(c, output_fields, n_output_fields, fields, &n_fields);
    if (st != SX_OK)
        return st;
    if (sx__deadline_check_ambient() != SX_OK)
        return SX_ETIMEDOUT;
    sx__expr *e = NULL;
    st = sx__parse_filter(c, filter, &e);
    if (st != SX_OK)
        return st;
    sx__view v;
    st = sx__view_get(c, &v);
    if (st != SX_OK) {
        sx__expr_free(e);
        return st;
    }
    rowref *refs = NULL;
    size_t n = 0, cap = 0;
    uint64_t skipped = 0;
    for (uint32_t i = 0; st == SX_OK && i < v.n; i++) {
        if (limit && n >= limit)
            break;
        st = sx__deadline_check_ambient();
        if (st != SX_OK)
            break;
        uint64_t *allow = NULL;
        size_t n_allowed = 0;
        st = sx__view_allow(c, &v, i, e, &allow, &n_allowed);
        if (st != SX_OK)
            break;
        for (size_t r = 0; r < v.rows[i] && n_allowed; r++) {
            if (!sx__bits_test(allow, r))
                continue;
            if (skipped < offset) {
                skipped++;
                continue;
            }
            if (limit && n >= limit)
                break;
            if (n == cap) {
                size_t ncap = cap ? cap * 2 : 256;
                rowref *nr = sx__realloc(refs, ncap * sizeof *nr);
                if (!nr) {
                    st = sx__err(SX_ENOMEM, "query");
                    break;
                }
                refs = nr;
                cap = ncap;
            }
            refs[n].seg = i;
            refs[n].row = (uint32_t)r;
            n++;
        }
        sx__free(allow);
    }
    if (st == SX_OK)
        st = sx__build_rowset(c, &v, refs, n, fields, n_fields, out);
    sx__free(refs);
    sx__view_release(&v);
    sx__expr_free(e);
    return st;
}

sx_status sx_query(sx_collection *c,
                   const char *filter,
                   const char *const *output_fields,
                   size_t n_output_fields,
                   uint64_t limit,
                   uint64_t offset,
                   sx_rowset **out)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx_status st = query_impl(c, filter, output_fields, n_output_fields, limit, offset, out);
    sx_io_phase_set(prev);
    return st;
}

static sx_status count_impl(sx_collection *c, const char *filter, uint64_t *out)
{
    if (sx__deadline_check_ambient() != SX_OK)
        return SX_ETIMEDOUT;
    sx__expr *e = NULL;
    sx_status st = sx__parse_filter(c, filter, &e);
    if (st != SX_OK)
        return st;
    sx__view v;
    st = sx__view_get(c, &v);
    if (st != SX_OK) {
        sx__expr_free(e);
        return st;
    }
    uint64_t total = 0;
    for (size_t i = 0; st == SX_OK && i < v.n; i++) {
        st = sx__deadline_check_ambient();
        if (st != SX_OK)
            break;
        if (!e) {
            total += v.rows[i] - sx__bits_count(v.segs[i]->deleted, v.rows[i]);
            continue;
        }
        uint64_t *allow = NULL;
        size_t n_allowed = 0;
        st = sx__view_allow(c, &v, i, e, &allow, &n_allowed);
        total += n_allowed;
        sx__free(allow);
    }
    sx__view_release(&v);
    sx__expr_free(e);
    if (st == SX_OK)
        *out = total;
    return st;
}

sx_status sx_count(sx_collection *c, const char *filter, uint64_t *out)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx_status st = count_impl(c, filter, out);
    sx_io_phase_set(prev);
    return st;
}

static sx_status get_impl(sx_collection *c,
                          const sx_keys *keys,
                          const char *const *output_fields,
                          size_t n_output_fields,
                          sx_rowset **out)
{
    if (!keys || (keys->n && !keys->ints == !keys->strs))
        return sx__err(SX_EINVAL, "keys: exactly one of ints/strs must be set");
    bool want_int = c->types[c->pk] == SX_FIELD_INT64;
    if (keys->n && want_int != (keys->ints != NULL))
        return sx__err(SX_EINVAL, "primary key \"%s\" is %s", c->names[c->pk],
                       want_int ? "int64" : "varchar");
    size_t fields[SX_MAX_FIELDS * 2];
    size_t n_fields = 0;
    sx_status st = sx__resolve_fields(c, output_fields, n_output_fields, fields, &n_fields);
    if (st != SX_OK)
        return st;
    if (sx__deadline_check_ambient() != SX_OK)
        return SX_ETIMEDOUT;
    rowref *refs = sx__malloc((keys->n + 1) * sizeof *refs);
    size_t n = 0;
    if (!refs)
        return sx__err(SX_ENOMEM, "get");
    /* The view and the pk lookups under one write_mu: every change of the segment list (seal,
     * compaction swap) and of the pk map happens under it, so the segment a key points to is in
     * the view. (A view taken before write_mu missed keys a compaction had just moved.) */
    sx__view v;
    sx__mutex_lock(&c->write_mu);
    st = sx__view_get(c, &v);
    if (st != SX_OK) {
        sx__mutex_unlock(&c->write_mu);
        sx__free(refs);
        return st;
    }
    for (size_t i = 0; i < keys->n; i++) {
        uint64_t seg;
        uint32_t row;
        bool hit = keys->ints ? sx__pk_get_i(c, keys->ints[i], &seg, &row)
                              : keys->strs[i] && sx__pk_get_s(c, keys->strs[i], &seg, &row);
        if (!hit)
            continue;
        for (uint32_t s = 0; s < v.n; s++) {
            if (v.segs[s]->id != seg)
                continue;
            if (row < v.rows[s] && !sx__bits_test_atomic(v.segs[s]->deleted, row)) {
                refs[n].seg = s;
                refs[n].row = row;
                n++;
            }
            break;
        }
    }
    sx__mutex_unlock(&c->write_mu);
    /* the lookups are O(keys) hash probes under write_mu (not cut short there); the rowset
     * copy after them is checked once more */
    st = sx__deadline_check_ambient();
    if (st == SX_OK)
        st = sx__build_rowset(c, &v, refs, n, fields, n_fields, out);
    sx__free(refs);
    sx__view_release(&v);
    return st;
}

sx_status sx_get(sx_collection *c,
                 const sx_keys *keys,
                 const char *const *output_fields,
                 size_t n_output_fields,
                 sx_rowset **out)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx_status st = get_impl(c, keys, output_fields, n_output_fields, out);
    sx_io_phase_set(prev);
    return st;
}

/* A delete is write-path I/O: the whole call, its filter scan included, is INSERT (query_impl,
 * not sx_query, so the scan is not re-tagged QUERY). */
static sx_status delete_where_impl(sx_collection *c, const char *filter, uint64_t *n_deleted)
{
    if (!filter || !*filter)
        return sx__err(SX_EINVAL, "delete needs a filter expression");
    sx_rowset *rs = NULL;
    sx_status st = query_impl(c, filter, NULL, 0, 0, 0, &rs);
    if (st != SX_OK)
        return st;
    sx_keys k = { rs->n_rows, NULL, NULL };
    if (rs->cols[0].type == SX_FIELD_INT64)
        k.ints = rs->cols[0].data;
    else
        k.strs = (const char *const *)rs->cols[0].data;
    st = sx_delete(c, &k, n_deleted);
    sx_rowset_free(rs);
    return st;
}

sx_status sx_delete_where(sx_collection *c, const char *filter, uint64_t *n_deleted)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_INSERT);
    sx_status st = delete_where_impl(c, filter, n_deleted);
    sx_io_phase_set(prev);
    return st;
}
