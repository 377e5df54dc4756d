/*
 * test_deadline.c: sx_deadline_set (issue 13, finding 3: no server-side deadline).
 *
 * 1. A deadline that has passed makes sx_search / sx_query / sx_count / sx_get /
 *    sx_delete_where return SX_ETIMEDOUT "deadline exceeded after N ms", changing nothing; with
 *    the deadline cleared every call works again with the same results.
 * 2. Mid-work: a count whose filter takes T (>= 0.3 s, grown until it does) and an exact search
 *    of T (nq grown likewise; T the fastest of three unbounded runs) are given a deadline of T/10;
 * each must stop with SX_ETIMEDOUT in under T/2 + 50 ms (generous: the checks are every 1024 rows /
 * per block), and the collection answers the same afterwards. Bounds are relative to the same
 * machine's unbounded run, so the load of the shared build machine cancels out; a search that
 * ends before its deadline or stops past the bound (the load changed after the calibration)
 * calibrates again, at most three times.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "harness.h"
#include "sextant.h"

#define DIM 32
#define NR  20000
#define SL  200

static sx_db *db;
static sx_collection *coll;
static float *vecs;

static double now_s(void)
{
    return (double)sx_clock_ns() / 1e9;
}

static void setup(void)
{
    sx_db_options o = { 0 };
    o.build_threads = 2;
    o.search_threads = 2;
    ASSERT_OK(sx_db_open(test_tmpdir("deadline"), &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "s", SX_FIELD_VARCHAR, false, false, 0, SL + 1 } };
    sx_collection_def d = { "c", f, 3, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    ASSERT_OK(sx_collection_open(db, "c", &coll));
    int64_t *ids = malloc(NR * sizeof *ids);
    char **strs = malloc(NR * sizeof *strs);
    vecs = malloc((size_t)NR * DIM * sizeof *vecs);
    ASSERT(ids && strs && vecs);
    uint64_t rs = 11;
    for (size_t i = 0; i < NR; i++) {
        ids[i] = (int64_t)i;
        strs[i] = malloc(SL + 1);
        ASSERT(strs[i]);
        for (int k = 0; k < SL; k++)
            strs[i][k] = "abcd"[test_rand(&rs) % 4];
        strs[i][SL] = '\0';
        for (int k = 0; k < DIM; k++)
            vecs[i * DIM + k] = test_randf(&rs);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                         { "vec", SX_FIELD_FLOAT_VECTOR, vecs },
                         { "s", SX_FIELD_VARCHAR, strs } };
    sx_batch b = { NR, cols, 3 };
    ASSERT_OK(sx_insert(coll, &b, NULL));
    for (size_t i = 0; i < NR; i++)
        free(strs[i]);
    free(strs);
    free(ids);
}

static void expect_timeout(sx_status st, const char *what)
{
    if (st != SX_ETIMEDOUT)
        FAILF("%s: got %s, want SX_ETIMEDOUT", what, sx_status_str(st));
    if (!strstr(sx_errmsg(), "deadline exceeded after ") || !strstr(sx_errmsg(), " ms"))
        FAILF("%s: message \"%s\"", what, sx_errmsg());
}

static void deadline_passed(void)
{
    uint64_t n0 = 0;
    ASSERT_OK(sx_count(coll, "s like \"a%\"", &n0));
    ASSERT(n0 > 0);
    float q[DIM] = { 0 };
    sx_search_req r = { .queries = q, .nq = 1, .k = 10, .metric = -1 };
    int64_t key = 5;
    sx_keys keys = { 1, &key, NULL };
    sx_rowset *rs = NULL;
    uint64_t n = 0;

    int64_t prev = sx_deadline_set(sx_clock_ns());
    ASSERT_EQ(prev, 0);
    expect_timeout(sx_search(coll, &r, &rs), "search");
    expect_timeout(sx_query(coll, "id < 100", NULL, 0, 0, 0, &rs), "query");
    expect_timeout(sx_count(coll, "s like \"a%\"", &n), "count");
    expect_timeout(sx_count(coll, NULL, &n), "count all");
    expect_timeout(sx_get(coll, &keys, NULL, 0, &rs), "get");
    expect_timeout(sx_delete_where(coll, "s like \"a%\"", &n), "delete_where");
    ASSERT(sx_deadline_set(0) > 0);

    /* nothing changed, everything answers */
    ASSERT_OK(sx_count(coll, "s like \"a%\"", &n));
    ASSERT_EQ(n, n0);
    ASSERT_OK(sx_search(coll, &r, &rs));
    ASSERT_EQ(rs->topks[0], 10);
    sx_rowset_free(rs);
    ASSERT_OK(sx_get(coll, &keys, NULL, 0, &rs));
    ASSERT_EQ(rs->n_rows, 1);
    sx_rowset_free(rs);
    /* a deadline far away changes nothing */
    (void)sx_deadline_set(sx_clock_ns() + (int64_t)60 * 1000000000);
    ASSERT_OK(sx_count(coll, "s like \"a%\"", &n));
    ASSERT_EQ(n, n0);
    (void)sx_deadline_set(0);
}

/* A filter of `terms` like-terms or-ed together (each `s like "%x_y%..."`, matching few rows). */
static char *heavy_filter(int terms)
{
    size_t cap = (size_t)terms * 40 + 16, o = 0;
    char *f = malloc(cap);
    if (!f)
        abort();
    for (int t = 0; t < terms; t++)
        o += (size_t)snprintf(f + o, cap - o, "%ss like \"%%%c_%c_%c_dd%c%%\"", t ? " or " : "",
                              "abcd"[t % 4], "abcd"[(t / 4) % 4], "abcd"[(t / 16) % 4],
                              "abcd"[(t / 64) % 4]);
    return f;
}

static void deadline_mid_count(void)
{
    int terms = 8;
    double t_full = 0;
    uint64_t n_full = 0;
    char *f = NULL;
    for (;;) {
        free(f);
        f = heavy_filter(terms);
        t_full = 1e9; /* the fastest of three runs, as deadline_mid_search says why */
        for (int rep = 0; rep < 3; rep++) {
            double t0 = now_s();
            ASSERT_OK(sx_count(coll, f, &n_full));
            double t = now_s() - t0;
            t_full = t < t_full ? t : t_full;
        }
        if (t_full >= 0.3 || terms >= 1024)
            break;
        terms *= 2;
    }
    fprintf(stderr, "count: %d terms, %.3f s unbounded\n", terms, t_full);
    ASSERT(t_full >= 0.3);
    double t0 = now_s();
    (void)sx_deadline_set(sx_clock_ns() + (int64_t)(t_full / 10 * 1e9));
    uint64_t n = 0;
    sx_status st = sx_count(coll, f, &n);
    (void)sx_deadline_set(0);
    double dt = now_s() - t0;
    fprintf(stderr, "count with a deadline of %.3f s: %s after %.3f s\n", t_full / 10,
            sx_status_str(st), dt);
    expect_timeout(st, "count");
    if (dt > t_full / 2 + 0.05)
        FAILF("count stopped after %.3f s, bound %.3f s", dt, t_full / 2 + 0.05);
    ASSERT_OK(sx_count(coll, f, &n));
    ASSERT_EQ(n, n_full);
    free(f);
}

static void deadline_mid_search(void)
{
    size_t nq = 64;
    double t_full = 0, t0 = 0, dt = 0;
    sx_rowset *rs = NULL;
    sx_status st = SX_OK;
    /* The load of a shared machine can change between the calibration and the bounded run: a
     * search that ends before its own deadline (seen: 0.34 s calibrated, then 0.031 s) or that
     * stops past the bound (seen under ASan with a parallel test: 0.332 s calibrated, stopped
     * after 0.282 s) calibrates again, at most three times; a deadline that is not enforced
     * mid-search fails all three. */
    for (int attempt = 0; attempt < 3; attempt++) {
        for (;;) {
            /* the fastest of three runs: a first run can be several times slower (a cold start, or
             * the parallel test's load; seen under ASan: 0.437 s, then 0.040 s for the same
             * search), and a deadline of a tenth of a slow run would then not be reached at all */
            sx_search_req r = { .queries = vecs, .nq = nq, .k = 10, .metric = -1 };
            t_full = 1e9;
            for (int rep = 0; rep < 3; rep++) {
                double ts = now_s();
                ASSERT_OK(sx_search(coll, &r, &rs));
                double t = now_s() - ts;
                t_full = t < t_full ? t : t_full;
                sx_rowset_free(rs);
                rs = NULL;
            }
            if (t_full >= 0.3 || nq >= NR)
                break;
            nq *= 2;
            if (nq > NR)
                nq = NR;
        }
        fprintf(stderr, "search: nq %zu, %.3f s unbounded\n", nq, t_full);
        ASSERT(t_full >= 0.3);
        sx_search_req r = { .queries = vecs, .nq = nq, .k = 10, .metric = -1 };
        t0 = now_s();
        (void)sx_deadline_set(sx_clock_ns() + (int64_t)(t_full / 10 * 1e9));
        st = sx_search(coll, &r, &rs);
        (void)sx_deadline_set(0);
        dt = now_s() - t0;
        fprintf(stderr, "search with a deadline of %.3f s: %s after %.3f s\n", t_full / 10,
                sx_status_str(st), dt);
        if (st == SX_OK)
            sx_rowset_free(rs);
        rs = NULL;
        bool early = st == SX_OK && dt < t_full / 10;
        bool late = st == SX_ETIMEDOUT && dt > t_full / 2 + 0.05;
        if (!early && !late)
            break;
    }
    sx_search_req r = { .queries = vecs, .nq = nq, .k = 10, .metric = -1 };
    expect_timeout(st, "search");
    if (dt > t_full / 2 + 0.05)
        FAILF("search stopped after %.3f s, bound %.3f s", dt, t_full / 2 + 0.05);
    /* usable afterwards: query 0's nearest row is row 0 itself */
    r.nq = 1;
    ASSERT_OK(sx_search(coll, &r, &rs));
    ASSERT_EQ(rs->topks[0], 10);
    ASSERT_EQ(((const int64_t *)rs->cols[0].data)[0], 0);
    sx_rowset_free(rs);
}

int main(void)
{
    RUN(setup);
    if (!coll)
        return TEST_DONE();
    RUN(deadline_passed);
    RUN(deadline_mid_count);
    RUN(deadline_mid_search);
    sx_collection_release(coll);
    sx_db_close(db);
    free(vecs);
    return TEST_DONE();
}
