/*
 * test_sparse.c: sparse vectors in a VARCHAR field and sx_sparse_search, against an oracle.
 *
 *   format        the text form: random vectors round-trip bit for bit through sx_sparse_format
 *                 and sx_sparse_parse; malformed texts (order, duplicates, negative, NaN, the
 *                 reserved index 2^32 - 1, stray separators, spaces) are refused.
 *   search        2,500 rows over a 400-term vocabulary with a skewed term distribution (a few
 *                 terms in most rows, many rare ones), some rows empty, random values: every
 *                 answer is compared with a brute force computed here (inner products in double
 *                 over the rows that share an index with the query, drop ratios applied by an
 *                 implementation of the test's own): growing rows only; after a flush (sealed
 *                 segments, inverted lists); sealed + growing; with deletes, a filter, an offset,
 *                 several queries in one call, ignore_growing, drop_ratio_search and
 *                 drop_ratio_build; after a compaction and after a reopen (WAL replay). The pruned
 *                 search (MaxScore) must answer exactly what the exhaustive one does (same ids,
 *                 same float scores); both are timed on the sealed data and the times printed
 *                 (speed is measured in bench/, here only exactness is asserted).
 *   errors        queries with unsorted or negative entries, a field that is not VARCHAR, bad
 *                 ratios; a stored row that does not parse fails the search with SX_ECORRUPT.
 */
#include <math.h>
#include <pthread.h>
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define N      2500
#define VOCAB  400
#define MAXNNZ 60
#define NQ     12

typedef struct svec {
    size_t nnz;
    uint32_t idx[MAXNNZ];
    float val[MAXNNZ];
} svec;

static svec rows[N];
static bool live[N];
static int64_t tags[N];
static uint64_t rng;
static sx_db *db;
static sx_collection *coll;
static char dir[512];

/* ---------------------------------------------------------------- data */

/* A term with a skewed distribution: term t is drawn with weight about 1 / (t + 1). */
static uint32_t draw_term(void)
{
    double u = (double)test_randf(&rng);
    double x = pow((double)VOCAB + 1, u) - 1; /* log-uniform over [0, VOCAB] */
    uint32_t t = (uint32_t)x;
    return t >= VOCAB ? VOCAB - 1 : t;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void random_svec(svec *v, size_t max_nnz)
{
    size_t want = (size_t)(test_rand(&rng) % (max_nnz + 1));
    uint32_t t[MAXNNZ];
    size_t n = 0;
    for (size_t i = 0; i < want; i++)
        t[n++] = draw_term();
    qsort(t, n, sizeof *t, cmp_u32);
    v->nnz = 0;
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && t[i] == t[i - 1])
            continue;
        v->idx[v->nnz] = t[i] * 7919u % 100003u * 10u; /* spread the ids: not 0..VOCAB */
        v->val[v->nnz] = 0.001f + test_randf(&rng) * 3.0f;
        v->nnz++;
    }
    /* the spread keeps the order (t * 7919 mod 100003 is not monotone): sort the pairs */
    for (size_t i = 1; i < v->nnz; i++)
        for (size_t j = i; j > 0 && v->idx[j] < v->idx[j - 1]; j--) {
            uint32_t ti = v->idx[j];
            v->idx[j] = v->idx[j - 1];
            v->idx[j - 1] = ti;
            float tv = v->val[j];
            v->val[j] = v->val[j - 1];
            v->val[j - 1] = tv;
        }
}

static sx_db_options opts(void)
{
    sx_db_options o = { 0 };
    o.segment_max_bytes = 2 * 4 * 900; /* about 900 rows a segment (the dense field's bytes) */
    o.sync_mode = SX_SYNC_NONE;
    return o;
}

static void open_db(void)
{
    sx_db_options o = opts();
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "sp", &coll));
}

static void close_db(void)
{
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
}

static void insert_range(size_t from, size_t to, bool upsert)
{
    for (; to - from > 500; from += 500) /* a batch must fit in a segment */
        insert_range(from, from + 500, upsert);
    size_t n = to - from;
    int64_t *ids = malloc(n * sizeof *ids), *tg = malloc(n * sizeof *tg);
    float *dense = malloc(n * 2 * sizeof *dense);
    char **txt = malloc(n * sizeof *txt);
    ASSERT(ids && tg && dense && txt);
    for (size_t i = 0; i < n; i++) {
        size_t id = from + i;
        random_svec(&rows[id], id % 17 == 0 ? 0 : (id % 5 == 0 ? MAXNNZ : 12));
        ids[i] = (int64_t)id;
        tg[i] = tags[id] = (int64_t)(test_rand(&rng) % 3);
        dense[2 * i] = (float)id;
        dense[2 * i + 1] = 1;
        size_t len = sx_sparse_format(rows[id].idx, rows[id].val, rows[id].nnz, NULL, 0);
        txt[i] = malloc(len + 1);
        ASSERT(txt[i]);
        ASSERT_EQ(sx_sparse_format(rows[id].idx, rows[id].val, rows[id].nnz, txt[i], len + 1), len);
        live[id] = true;
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids, NULL },
                         { "v", SX_FIELD_FLOAT_VECTOR, dense, NULL },
                         { "sp", SX_FIELD_VARCHAR, txt, NULL },
                         { "tag", SX_FIELD_INT64, tg, NULL } };
    sx_batch b = { n, cols, 4 };
    ASSERT_OK(upsert ? sx_upsert(coll, &b) : sx_insert(coll, &b, NULL));
    for (size_t i = 0; i < n; i++)
        free(txt[i]);
    free(txt);
    free(ids);
    free(tg);
    free(dense);
}

/* ---------------------------------------------------------------- the oracle */

/* The test's own drop: the floor(n * ratio) smallest values go; of equal values at the cut the
 * ones with the smallest indexes go first (the engine keeps the last ones by index). */
static void drop(const uint32_t *idx,
                 const float *val,
                 size_t n,
                 float ratio,
                 uint32_t *oi,
                 float *ov,
                 size_t *on)
{
    size_t k = (size_t)floor((double)n * (double)ratio);
    bool gone[MAXNNZ + 8] = { false };
    for (size_t d = 0; d < k; d++) {
        size_t best = SIZE_MAX;
        for (size_t i = 0; i < n; i++)
            if (!gone[i] && (best == SIZE_MAX || val[i] < val[best]))
                best = i;
        gone[best] = true;
    }
    *on = 0;
    for (size_t i = 0; i < n; i++)
        if (!gone[i]) {
            oi[*on] = idx[i];
            ov[*on] = val[i];
            (*on)++;
        }
}

typedef struct ohit {
    double score;
    int64_t id;
} ohit;

static int ohit_cmp(const void *a, const void *b)
{
    const ohit *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* BM25 mode (k1 1.2, b 0.75): the statistics the oracle scores with, over the live rows as they
 * were before a check hid the growing ones (bm25_prepare). */
static bool g_bm25;
static double g_n_docs, g_avgdl;

static double doc_len(size_t r)
{
    double len = 0;
    for (size_t k = 0; k < rows[r].nnz; k++)
        len += (double)rows[r].val[k];
    return (double)(float)len; /* the engine keeps a row's length as a float */
}

static void bm25_prepare(void)
{
    double n = 0, sum = 0;
    for (size_t r = 0; r < N; r++)
        if (live[r]) {
            n += 1;
            sum += doc_len(r);
        }
    g_n_docs = n;
    g_avgdl = n > 0 && sum > 0 ? sum / n : 1;
}

static double bm25_idf(uint32_t t, const bool *alive)
{
    double df = 0;
    for (size_t r = 0; r < N; r++) {
        if (!alive[r])
            continue;
        for (size_t k = 0; k < rows[r].nnz; k++)
            df += rows[r].idx[k] == t;
    }
    return log(1 + (g_n_docs - df + 0.5) / (df + 0.5));
}

static bool g_alive[N]; /* the live rows of the statistics */

/* All matching rows of query q, best first. */
static size_t oracle(const svec *q, float dr_search, float dr_build, int tag_mod, ohit *out)
{
    uint32_t qi[MAXNNZ];
    float qv[MAXNNZ];
    size_t qn;
    drop(q->idx, q->val, q->nnz, dr_search, qi, qv, &qn);
    size_t m = 0;
    for (size_t r = 0; r < N; r++) {
        if (!live[r] || (tag_mod >= 0 && tags[r] != tag_mod))
            continue;
        uint32_t ri[MAXNNZ];
        float rv[MAXNNZ];
        size_t rn;
        drop(rows[r].idx, rows[r].val, rows[r].nnz, dr_build, ri, rv, &rn);
        double s = 0;
        bool any = false;
        for (size_t a = 0; a < qn; a++)
            for (size_t b = 0; b < rn; b++)
                if (qi[a] == ri[b]) {
                    if (g_bm25) {
                        double tf = (double)rv[b], dl = doc_len(r);
                        s += (double)qv[a] * bm25_idf(qi[a], g_alive) * tf * 2.2 /
                             (tf + 1.2 * (1 - 0.75 + 0.75 * dl / g_avgdl));
                    } else {
                        s += (double)qv[a] * (double)rv[b];
                    }
                    any = true;
                }
        if (any)
            out[m++] = (ohit){ s, (int64_t)r };
    }
    qsort(out, m, sizeof *out, ohit_cmp);
    return m;
}

static svec queries[NQ];

static sx_sparse_query as_query(const svec *v)
{
    return (sx_sparse_query){ v->idx, v->val, v->nnz };
}

/* Runs the search both ways, checks them equal to each other and to the oracle. */
static void check(const char *what,
                  uint32_t k,
                  uint32_t offset,
                  float drs,
                  float drb,
                  int tag_mod,
                  bool ign_growing,
                  size_t growing_from)
{
    sx_sparse_query qs[NQ];
    for (size_t q = 0; q < NQ; q++)
        qs[q] = as_query(&queries[q]);
    char filter[32] = "";
    if (tag_mod >= 0)
        snprintf(filter, sizeof filter, "tag == %d", tag_mod);
    const char *of[] = { "tag" };
    sx_sparse_req req = { .field = "sp",
                          .queries = qs,
                          .nq = NQ,
                          .k = k,
                          .offset = offset,
                          .filter = filter,
                          .output_fields = of,
                          .n_output_fields = 1,
                          .drop_ratio_search = drs,
                          .drop_ratio_build = drb,
                          .ignore_growing = ign_growing,
                          .scoring = g_bm25 ? SX_SPARSE_BM25 : SX_SPARSE_IP,
                          .bm25_k1 = 1.2f,
                          .bm25_b = 0.75f };
    memcpy(g_alive, live, sizeof g_alive);
    bm25_prepare(); /* over every live row, growing ones too, whatever the check hides */
    sx_rowset *pr = NULL, *ex = NULL;
    ASSERT_OK(sx_sparse_search(coll, &req, &pr));
    req.exhaustive = true;
    ASSERT_OK(sx_sparse_search(coll, &req, &ex));
    ASSERT_EQ(pr->nq, NQ);
    ASSERT_EQ(pr->n_rows, ex->n_rows);
    const int64_t *pid = pr->cols[0].data, *eid = ex->cols[0].data;
    ASSERT(strcmp(pr->cols[1].name, "tag") == 0);
    for (size_t r = 0; r < pr->n_rows; r++) {
        if (pid[r] != eid[r] || pr->distances[r] != ex->distances[r])
            FAILF("%s: row %zu: pruned %lld (%.9g) vs exhaustive %lld (%.9g)", what, r,
                  (long long)pid[r], (double)pr->distances[r], (long long)eid[r],
                  (double)ex->distances[r]);
    }
    static ohit all[N];
    size_t at = 0;
    for (size_t q = 0; q < NQ; q++) {
        /* ignore_growing: the oracle must not see the rows still growing */
        bool saved[N];
        if (ign_growing) {
            memcpy(saved, live, sizeof saved);
            for (size_t r = growing_from; r < N; r++)
                live[r] = false;
        }
        size_t m = oracle(&queries[q], drs, drb, tag_mod, all);
        if (ign_growing)
            memcpy(live, saved, sizeof saved);
        size_t want = m > offset ? m - offset : 0;
        if (want > k)
            want = k;
        if (pr->topks[q] != want)
            FAILF("%s: query %zu: %zu hits, the oracle has %zu (of %zu matching)", what, q,
                  pr->topks[q], want, m);
        for (size_t h = 0; h < want; h++) {
            const ohit *o = &all[offset + h];
            int64_t id = pid[at + h];
            double got = (double)pr->distances[at + h];
            if (fabs(got - o->score) > 1e-5 * (1 + fabs(o->score)))
                FAILF("%s: query %zu hit %zu: score %.9g, the oracle %.9g (id %lld vs %lld)", what,
                      q, h, got, o->score, (long long)id, (long long)o->id);
            /* ids may differ only between rows whose scores tie within float rounding */
            if (id != o->id) {
                bool tie = false;
                for (size_t j = 0; j < m; j++)
                    if (all[j].id == id && fabs(all[j].score - o->score) < 1e-6 * (1 + o->score))
                        tie = true;
                if (!tie)
                    FAILF("%s: query %zu hit %zu: id %lld, the oracle %lld (score %.9g)", what, q,
                          h, (long long)id, (long long)o->id, o->score);
            }
            ASSERT(live[id]);
            if (tag_mod >= 0)
                ASSERT_EQ(((const int64_t *)pr->cols[1].data)[at + h], tag_mod);
        }
        at += want;
    }
    sx_rowset_free(pr);
    sx_rowset_free(ex);
}

static void all_checks(const char *phase, size_t growing_from)
{
    char w[96];
    snprintf(w, sizeof w, "%s k10", phase);
    check(w, 10, 0, 0, 0, -1, false, growing_from);
    snprintf(w, sizeof w, "%s k100 offset 7", phase);
    check(w, 100, 7, 0, 0, -1, false, growing_from);
    snprintf(w, sizeof w, "%s filter tag==1", phase);
    check(w, 20, 0, 0, 0, 1, false, growing_from);
    snprintf(w, sizeof w, "%s drop_ratio_search 0.3", phase);
    check(w, 15, 0, 0.3f, 0, -1, false, growing_from);
    snprintf(w, sizeof w, "%s drop_ratio_build 0.25", phase);
    check(w, 15, 0, 0, 0.25f, -1, false, growing_from);
    snprintf(w, sizeof w, "%s k2000", phase);
    check(w, 2000, 0, 0, 0, -1, false, growing_from);
    /* BM25: the rows' values as term frequencies, statistics over every live row */
    g_bm25 = true;
    snprintf(w, sizeof w, "%s BM25 k10", phase);
    check(w, 10, 0, 0, 0, -1, false, growing_from);
    snprintf(w, sizeof w, "%s BM25 filter tag==2 offset 3", phase);
    check(w, 25, 3, 0, 0, 2, false, growing_from);
    g_bm25 = false;
}

/* ---------------------------------------------------------------- tests */

static void format(void)
{
    for (int t = 0; t < 200; t++) {
        svec v;
        random_svec(&v, MAXNNZ);
        for (size_t i = 0; i < v.nnz; i++) /* awkward values: tiny, huge, zero */
            if (i % 7 == 3)
                v.val[i] = i % 2 ? 1e-38f : 3e38f;
            else if (i % 11 == 5)
                v.val[i] = 0;
        char buf[4096];
        size_t len = sx_sparse_format(v.idx, v.val, v.nnz, buf, sizeof buf);
        ASSERT(len < sizeof buf);
        uint32_t idx[MAXNNZ];
        float val[MAXNNZ];
        size_t n = 0;
        ASSERT_OK(sx_sparse_parse(buf, idx, val, MAXNNZ, &n));
        ASSERT_EQ(n, v.nnz);
        ASSERT(memcmp(idx, v.idx, n * sizeof *idx) == 0);
        ASSERT(memcmp(val, v.val, n * sizeof *val) == 0);   /* bit for bit */
        ASSERT_OK(sx_sparse_parse(buf, NULL, NULL, 0, &n)); /* counting */
        ASSERT_EQ(n, v.nnz);
    }
    char small[8];
    uint32_t i3[3] = { 1, 20, 300 };
    float v3[3] = { 1, 2, 3 };
    size_t need = sx_sparse_format(i3, v3, 3, small, sizeof small);
    ASSERT_EQ(need, strlen("1:1,20:2,300:3"));
    ASSERT(strcmp(small, "1:1,20:") == 0); /* cut as snprintf cuts, terminated */
    size_t n = 9;
    ASSERT_OK(sx_sparse_parse("", NULL, NULL, 0, &n));
    ASSERT_EQ(n, 0);
    static const char *const bad[] = { "2:1,1:1",  "1:1,1:2", "1:-0.5",       "1:nan",
                                       "1:inf",    "1:",      ":1",           "1:2,",
                                       " 1:2",     "1: 2",    "4294967295:1", "1;2",
                                       "1:2,,3:4", "a:1",     "1:0x",         "1:1e99" };
    uint32_t idx[8];
    float val[8];
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        sx_status st = sx_sparse_parse(bad[b], idx, val, 8, &n);
        if (st != SX_EINVAL)
            FAILF("\"%s\" gave %s, want SX_EINVAL", bad[b], sx_status_str(st));
    }
    ASSERT_STATUS(sx_sparse_parse("1:1,2:2,3:3", idx, val, 2, &n), SX_EINVAL); /* over cap */
    ASSERT_OK(sx_sparse_parse("4294967294:1", idx, val, 8, &n));
    ASSERT_EQ(idx[0], 4294967294u);
}

static void setup(void)
{
    rng = 0x5eed0000cafeULL;
    snprintf(dir, sizeof dir, "%s", test_tmpdir("sparse"));
    sx_db_options o = opts();
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                         { .name = "v", .type = SX_FIELD_FLOAT_VECTOR, .dim = 2 },
                         { .name = "sp", .type = SX_FIELD_VARCHAR, .max_length = 65535 },
                         { .name = "tag", .type = SX_FIELD_INT64 } };
    sx_collection_def d = { "sp", f, 4, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "sp", &coll));
    for (size_t q = 0; q < NQ; q++)
        random_svec(&queries[q], q % 3 == 0 ? 4 : 25);
    queries[NQ - 1].nnz = 0; /* an empty query matches nothing */
}

static void search(void)
{
    insert_range(0, 700, false);
    all_checks("growing", N);
    ASSERT_OK(sx_flush(coll));
    all_checks("sealed", N);
    insert_range(700, 1800, false); /* a segment seals on the way */
    insert_range(1800, 2500, false);
    all_checks("sealed+growing", N);
    check("ignore_growing", 30, 0, 0, 0, -1, true, 1800);
    g_bm25 = true; /* the statistics still count the growing rows */
    check("BM25 ignore_growing", 30, 0, 0, 0, -1, true, 1800);
    g_bm25 = false;
    /* deletes: every 4th row, and an upsert that changes rows */
    int64_t del[N / 4 + 1];
    size_t nd = 0;
    for (size_t r = 0; r < N; r += 4) {
        del[nd++] = (int64_t)r;
        live[r] = false;
    }
    sx_keys keys = { nd, del, NULL };
    uint64_t gone = 0;
    ASSERT_OK(sx_delete(coll, &keys, &gone));
    ASSERT_EQ(gone, nd);
    insert_range(1001, 1041, true);
    all_checks("deletes+upserts", N);
    ASSERT_OK(sx_flush(coll));
    ASSERT_OK(sx_compact(coll));
    all_checks("compacted", N);
    insert_range(2401, 2451, true); /* in the WAL only */
    close_db();
    open_db();
    all_checks("reopened", N);
}

static void pruning_timing(void)
{
    /* a frequent-term query on all sealed data: MaxScore visits fewer rows than exhaustive;
     * timed (both exact), printed for the record */
    ASSERT_OK(sx_flush(coll));
    sx_sparse_query q[1] = { as_query(&queries[1]) };
    sx_sparse_req req = { .field = "sp", .queries = q, .nq = 1, .k = 5 };
    int64_t t0 = sx_clock_ns();
    for (int i = 0; i < 200; i++) {
        sx_rowset *r = NULL;
        ASSERT_OK(sx_sparse_search(coll, &req, &r));
        sx_rowset_free(r);
    }
    int64_t t1 = sx_clock_ns();
    req.exhaustive = true;
    for (int i = 0; i < 200; i++) {
        sx_rowset *r = NULL;
        ASSERT_OK(sx_sparse_search(coll, &req, &r));
        sx_rowset_free(r);
    }
    int64_t t2 = sx_clock_ns();
    printf("  200 searches, k 5, %zu query terms: MaxScore %.1f ms, exhaustive %.1f ms\n",
           queries[1].nnz, (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
}

/* Four threads search segments none of which has its inverted lists yet (just reopened): they
 * race to build and install them (sparse.c: the first install wins, the others'
 * builds are freed). Every answer must equal the exhaustive one computed before. Run under TSan
 * too (the Makefile's TSAN_TESTS). */
#define N_THREADS 4

typedef struct race_arg {
    const sx_rowset *ref;
    int failures;
} race_arg;

static void *race_main(void *p)
{
    race_arg *a = p;
    sx_sparse_query qs[NQ];
    for (size_t q = 0; q < NQ; q++)
        qs[q] = as_query(&queries[q]);
    sx_sparse_req req = { .field = "sp", .queries = qs, .nq = NQ, .k = 25 };
    for (int round = 0; round < 3; round++) {
        sx_rowset *r = NULL;
        if (sx_sparse_search(coll, &req, &r) != SX_OK) {
            a->failures++;
            continue;
        }
        if (r->n_rows != a->ref->n_rows ||
            memcmp(r->cols[0].data, a->ref->cols[0].data, r->n_rows * sizeof(int64_t)) != 0 ||
            memcmp(r->distances, a->ref->distances, r->n_rows * sizeof(float)) != 0)
            a->failures++;
        sx_rowset_free(r);
    }
    return NULL;
}

static void concurrent_builds(void)
{
    ASSERT_OK(sx_flush(coll));
    sx_sparse_query qs[NQ];
    for (size_t q = 0; q < NQ; q++)
        qs[q] = as_query(&queries[q]);
    sx_sparse_req req = { .field = "sp", .queries = qs, .nq = NQ, .k = 25, .exhaustive = true };
    sx_rowset *ref = NULL;
    ASSERT_OK(sx_sparse_search(coll, &req, &ref));
    close_db(); /* the segments come back from their files, without lists */
    open_db();
    pthread_t th[N_THREADS];
    race_arg args[N_THREADS];
    for (int t = 0; t < N_THREADS; t++) {
        args[t] = (race_arg){ ref, 0 };
        ASSERT_EQ(pthread_create(&th[t], NULL, race_main, &args[t]), 0);
    }
    int failures = 0;
    for (int t = 0; t < N_THREADS; t++) {
        pthread_join(th[t], NULL);
        failures += args[t].failures;
    }
    sx_rowset_free(ref);
    ASSERT_EQ(failures, 0);
}

static void errors(void)
{
    uint32_t idx[2] = { 5, 3 };
    float val[2] = { 1, 1 };
    sx_sparse_query q = { idx, val, 2 };
    sx_sparse_req req = { .field = "sp", .queries = &q, .nq = 1, .k = 5 };
    sx_rowset *r = NULL;
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EINVAL); /* unsorted */
    idx[1] = 9;
    val[0] = -1;
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EINVAL); /* negative */
    val[0] = 1;
    req.field = "tag";
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EINVAL); /* not VARCHAR */
    req.field = "nope";
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EINVAL);
    req.field = "sp";
    req.drop_ratio_search = 1;
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EINVAL);
    req.drop_ratio_search = 0;
    req.k = 0;
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EINVAL);
    req.k = 5;
    req.filter = "tag ==";
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_EPARSE);
    req.filter = NULL;
    /* a stored row that is not a sparse text: growing and sealed alike */
    int64_t id = 999999;
    float dense[2] = { 0, 0 };
    const char *txt[1] = { "3:1,2:1" };
    int64_t tg = 0;
    sx_column cols[] = { { "id", SX_FIELD_INT64, &id, NULL },
                         { "v", SX_FIELD_FLOAT_VECTOR, dense, NULL },
                         { "sp", SX_FIELD_VARCHAR, txt, NULL },
                         { "tag", SX_FIELD_INT64, &tg, NULL } };
    sx_batch b = { 1, cols, 4 };
    ASSERT_OK(sx_insert(coll, &b, NULL));
    idx[0] = 3;
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "not above") != NULL);
    ASSERT_OK(sx_flush(coll));
    ASSERT_STATUS(sx_sparse_search(coll, &req, &r), SX_ECORRUPT);
    close_db();
}

/* A collection without a FLOAT_VECTOR field (sparse vectors and scalars only): it is created,
 * written, flushed, compacted and reopened (its manifest is version 4, which older builds refuse
 * as an unsupported version), searched through sx_sparse_search against the oracle; dense-vector
 * calls say it has none. */
static void no_vectors(void)
{
    char d2[600];
    snprintf(d2, sizeof d2, "%s.novec", dir);
    sx_db_options o = opts();
    o.segment_max_bytes = 64 * 1024; /* rows sized at 1 KiB without vectors: 64 a segment */
    sx_db *db2 = NULL;
    ASSERT_OK(sx_db_open(d2, &o, &db2));
    sx_field_def f[] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                         { .name = "sp", .type = SX_FIELD_VARCHAR, .max_length = 65535 } };
    sx_collection_def d = { "nv", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db2, &d));
    sx_collection *c2 = NULL;
    ASSERT_OK(sx_collection_open(db2, "nv", &c2));
    size_t n = 60;
    int64_t *ids = malloc(n * sizeof *ids);
    char **txt = malloc(n * sizeof *txt);
    ASSERT(ids && txt);
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int64_t)i;
        size_t len = sx_sparse_format(rows[i].idx, rows[i].val, rows[i].nnz, NULL, 0);
        txt[i] = malloc(len + 1);
        (void)sx_sparse_format(rows[i].idx, rows[i].val, rows[i].nnz, txt[i], len + 1);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids, NULL },
                         { "sp", SX_FIELD_VARCHAR, txt, NULL } };
    sx_batch b = { n, cols, 2 };
    ASSERT_OK(sx_insert(c2, &b, NULL));
    sx_sparse_query q = as_query(&queries[1]);
    sx_sparse_req req = { .field = "sp", .queries = &q, .nq = 1, .k = 5 };
    sx_rowset *before = NULL, *after = NULL;
    ASSERT_OK(sx_sparse_search(c2, &req, &before));
    ASSERT(before->n_rows > 0);
    ASSERT_OK(sx_flush(c2));
    ASSERT_OK(sx_compact(c2));
    float qv[2] = { 0, 0 };
    sx_search_req dr = { .queries = qv, .nq = 1, .k = 1, .metric = -1 };
    sx_rowset *r = NULL;
    ASSERT_STATUS(sx_search(c2, &dr, &r), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "no FLOAT_VECTOR field") != NULL);
    sx_collection_release(c2);
    sx_db_close(db2);
    ASSERT_OK(sx_db_open(d2, &o, &db2));
    ASSERT_OK(sx_collection_open(db2, "nv", &c2));
    ASSERT_OK(sx_sparse_search(c2, &req, &after));
    ASSERT_EQ(after->n_rows, before->n_rows);
    ASSERT(memcmp(after->cols[0].data, before->cols[0].data, after->n_rows * sizeof(int64_t)) == 0);
    ASSERT(memcmp(after->distances, before->distances, after->n_rows * sizeof(float)) == 0);
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c2, NULL, &cnt));
    ASSERT_EQ(cnt, n);
    char mpath[700];
    snprintf(mpath, sizeof mpath, "%s/collections/nv/MANIFEST", d2);
    FILE *fp = fopen(mpath, "rb");
    ASSERT(fp != NULL);
    unsigned char hdr[12]; /* the version (u32, little-endian) follows the 8-byte magic */
    ASSERT_EQ(fread(hdr, 1, 12, fp), 12);
    fclose(fp);
    ASSERT_EQ(hdr[8], 4);
    sx_rowset_free(before);
    sx_rowset_free(after);
    sx_collection_release(c2);
    sx_db_close(db2);
    for (size_t i = 0; i < n; i++)
        free(txt[i]);
    free(txt);
    free(ids);
}

int main(void)
{
    RUN(format);
    RUN(setup);
    RUN(search);
    RUN(pruning_timing);
    RUN(concurrent_builds);
    RUN(no_vectors);
    RUN(errors);
    return TEST_DONE();
}
