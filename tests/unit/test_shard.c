/*
 * test_shard.c: the cluster proxy's shard functions (src/cluster/shard.c) against brute force.
 *
 * Search merge: random hits with distinct distances are placed on shards by the key hash, each
 * shard answers its best limit + offset per query (as a node does), and the merged answer must
 * equal the window [offset, offset + limit) of all hits sorted globally, for both distance
 * directions, several shard counts and queries per request. Also: shard names, row placement
 * (same key same shard, balance, keys that are not keys refused), query merges (count(*) summed,
 * rows ordered by key with the window), sums, malformed answers refused. Seeded.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cluster/shard.h"
#include "harness.h"

static uint64_t seed;

static void test_names(void)
{
    char b[64];
    unsigned k = 99;
    ASSERT(sx__shard_name("docs", 3, b, sizeof b));
    ASSERT(strcmp(b, "docs__s3") == 0);
    ASSERT(!sx__shard_name("docs", 3, b, 6));
    ASSERT(sx__shard_parse("docs__s12", b, sizeof b, &k));
    ASSERT(strcmp(b, "docs") == 0);
    ASSERT_EQ(k, 12u);
    ASSERT(sx__shard_parse("a__s1__s2", b, sizeof b, &k));
    ASSERT(strcmp(b, "a__s1") == 0);
    ASSERT_EQ(k, 2u);
    ASSERT(!sx__shard_parse("__s1", b, sizeof b, &k));
    ASSERT(!sx__shard_parse("a__s", b, sizeof b, &k));
    ASSERT(!sx__shard_parse("a__sx", b, sizeof b, &k));
    ASSERT(!sx__shard_parse("a__s1x", b, sizeof b, &k));
    ASSERT(!sx__shard_parse("plain", b, sizeof b, &k));
    ASSERT(!sx__shard_parse("docs__s1", b, 3, &k)); /* base does not fit */
    ASSERT(sx__shard_parse("docs__s1", NULL, 0, NULL));
}

static void test_placement(void)
{
    unsigned n = 4;
    size_t per[4] = { 0 };
    for (int i = 0; i < 10000; i++) {
        json_t *v = json_integer(i * 7919 + 11);
        int a = sx__shard_of_pk(v, n), b2 = sx__shard_of_pk(v, n);
        ASSERT(a >= 0 && a < (int)n);
        ASSERT_EQ(a, b2);
        per[a]++;
        json_decref(v);
    }
    for (unsigned k = 0; k < n; k++)
        ASSERT(per[k] > 2000 && per[k] < 3000); /* 2500 each, roughly */
    json_t *s = json_string("doc-17");
    ASSERT(sx__shard_of_pk(s, 3) >= 0);
    json_decref(s);
    json_t *r = json_real(1.5);
    ASSERT_EQ(sx__shard_of_pk(r, 3), -1);
    ASSERT_EQ(sx__shard_of_pk(NULL, 3), -1);
    json_decref(r);

    /* split: every row once, on its key's shard, in the request's order per shard */
    json_t *rows = json_array();
    for (int i = 0; i < 300; i++)
        json_array_append_new(rows, json_pack("{s:I,s:i}", "id", (json_int_t)(i * 31), "v", i));
    json_t *out[SX__SHARD_MAX];
    ASSERT_OK(sx__shard_split_rows(rows, "id", 3, out, NULL));
    size_t total = 0;
    for (unsigned k = 0; k < 3; k++) {
        int last = -1;
        size_t i;
        json_t *row;
        json_array_foreach(out[k], i, row) {
            ASSERT_EQ(sx__shard_of_pk(json_object_get(row, "id"), 3), (int)k);
            int v = (int)json_integer_value(json_object_get(row, "v"));
            ASSERT(v > last);
            last = v;
        }
        total += json_array_size(out[k]);
        json_decref(out[k]);
    }
    ASSERT_EQ(total, (size_t)300);
    json_array_append_new(rows, json_pack("{s:s}", "v", "no key"));
    size_t bad = 0;
    ASSERT_STATUS(sx__shard_split_rows(rows, "id", 3, out, &bad), SX_EINVAL);
    ASSERT_EQ(bad, (size_t)300);
    json_t *notrows = json_object();
    ASSERT_STATUS(sx__shard_split_rows(notrows, "id", 3, out, NULL), SX_EINVAL);
    json_decref(notrows);
    json_decref(rows);
}

typedef struct hit {
    json_int_t id;
    double d;
} hit;

static bool larger;

static int cmp_hit(const void *a, const void *b)
{
    const hit *x = a, *y = b;
    if (x->d == y->d)
        return 0;
    return (larger ? x->d > y->d : x->d < y->d) ? -1 : 1;
}

/* One round: nq queries, m hits each, over n shards; the window (limit, offset). */
static void search_round(unsigned n, size_t nq, size_t m, size_t limit, size_t offset)
{
    hit *all = calloc(nq * m, sizeof *all);
    ASSERT(all);
    json_t *ans[SX__SHARD_MAX];
    json_t *data[SX__SHARD_MAX], *tk[SX__SHARD_MAX];
    for (unsigned s = 0; s < n; s++) {
        data[s] = json_array();
        tk[s] = json_array();
    }
    for (size_t q = 0; q < nq; q++) {
        hit *h = all + q * m;
        for (size_t i = 0; i < m; i++) {
            h[i].id = (json_int_t)(q * 100000 + i);
            h[i].d = (double)(test_rand(&seed) % 1000000) / 1000.0 + (double)i * 1e-9;
        }
        /* each shard's sorted best limit + offset */
        for (unsigned s = 0; s < n; s++) {
            hit *mine = calloc(m ? m : 1, sizeof *mine);
            size_t c = 0;
            for (size_t i = 0; i < m; i++) {
                json_t *v = json_integer(h[i].id);
                if (sx__shard_of_pk(v, n) == (int)s)
                    mine[c++] = h[i];
                json_decref(v);
            }
            qsort(mine, c, sizeof *mine, cmp_hit);
            size_t t = c < limit + offset ? c : limit + offset;
            for (size_t i = 0; i < t; i++)
                json_array_append_new(
                    data[s], json_pack("{s:I,s:f}", "id", mine[i].id, "distance", mine[i].d));
            json_array_append_new(tk[s], json_integer((json_int_t)t));
            free(mine);
        }
        qsort(h, m, sizeof *h, cmp_hit);
    }
    for (unsigned s = 0; s < n; s++)
        ans[s] =
            json_pack("{s:i,s:o,s:o,s:f}", "code", 0, "data", data[s], "topks", tk[s], "cost", 1.0);
    int order = sx__shard_search_order(ans, n);
    ASSERT(order == -1 || order == (larger ? 1 : 0));
    json_t *out = sx__shard_merge_search(ans, n, nq, limit, offset, larger);
    ASSERT(out);
    ASSERT_EQ(json_integer_value(json_object_get(out, "code")), 0);
    ASSERT_NEAR(json_number_value(json_object_get(out, "cost")), (double)n, 1e-9);
    const json_t *od = json_object_get(out, "data"), *otk = json_object_get(out, "topks");
    ASSERT_EQ(json_array_size(otk), nq);
    size_t at = 0;
    for (size_t q = 0; q < nq; q++) {
        size_t want = m > offset ? (m - offset < limit ? m - offset : limit) : 0;
        ASSERT_EQ((size_t)json_integer_value(json_array_get(otk, q)), want);
        for (size_t i = 0; i < want; i++) {
            const json_t *row = json_array_get(od, at + i);
            ASSERT_EQ(json_integer_value(json_object_get(row, "id")), all[q * m + offset + i].id);
        }
        at += want;
    }
    ASSERT_EQ(json_array_size(od), at);
    json_decref(out);
    for (unsigned s = 0; s < n; s++)
        json_decref(ans[s]);
    free(all);
}

/* Replica holders: the r highest scores of "<db>/<unit>@<id>", best first, for every r and set
 * of nodes (checked against a brute-force ranking); r 0 or over n: every node; removing a node
 * that is not a holder changes nothing (rendezvous hashing moves only what it must); the units
 * of a collection spread over the nodes. */
static void test_replica_holders(void)
{
    const char *ids[8] = { "q1", "q2", "q3", "q4", "q5", "q6", "q7", "q8" };
    char unit[32];
    int per_node[8] = { 0 };
    for (int u = 0; u < 64; u++) {
        snprintf(unit, sizeof unit, "c__s%d", u);
        for (size_t n = 1; n <= 8; n++) {
            uint32_t score[8];
            for (size_t i = 0; i < n; i++) {
                char key[96];
                snprintf(key, sizeof key, "default/%s@%s", unit, ids[i]);
                score[i] = sx__shard_str_hash(key);
            }
            for (unsigned r = 0; r <= n + 1; r++) {
                size_t out[8];
                size_t got = sx__replica_holders("default", unit, ids, n, r, out);
                size_t want = r == 0 || r > n ? n : r;
                ASSERT_EQ(got, want);
                for (size_t h = 0; h < got; h++) {
                    ASSERT(out[h] < n);
                    /* every other node scores lower than out[h], unless it is an earlier holder */
                    size_t above = 0;
                    for (size_t i = 0; i < n; i++)
                        above += score[i] > score[out[h]];
                    ASSERT_EQ(above, h);
                }
            }
            if (n == 8) {
                size_t out[2];
                ASSERT_EQ(sx__replica_holders("default", unit, ids, 8, 2, out), 2);
                per_node[out[0]]++;
                per_node[out[1]]++;
                /* drop a node that holds nothing: the holders stay */
                size_t gone = 0;
                while (gone == out[0] || gone == out[1])
                    gone++;
                const char *rest[7];
                size_t m = 0, map[7];
                for (size_t i = 0; i < 8; i++)
                    if (i != gone) {
                        map[m] = i;
                        rest[m++] = ids[i];
                    }
                size_t out2[2];
                ASSERT_EQ(sx__replica_holders("default", unit, rest, 7, 2, out2), 2);
                ASSERT_EQ(map[out2[0]], out[0]);
                ASSERT_EQ(map[out2[1]], out[1]);
            }
        }
    }
    for (int i = 0; i < 8; i++) /* 128 placements over 8 nodes: 16 each on average */
        ASSERT(per_node[i] >= 6 && per_node[i] <= 28);
}

static void test_search_merge(void)
{
    for (int dir = 0; dir < 2; dir++) {
        larger = dir == 1;
        for (unsigned n = 1; n <= 5; n++) {
            search_round(n, 1, 200, 10, 0);
            search_round(n, 3, 200, 10, 5);
            search_round(n, 2, 7, 10, 0);   /* fewer hits than the limit */
            search_round(n, 2, 30, 10, 25); /* the window past the end */
            search_round(n, 4, 1000, 100, 50);
        }
    }
    /* a topks that does not add up is refused, not read past */
    json_t *a = json_pack("{s:i,s:[{s:i,s:f}],s:[i]}", "code", 0, "data", "id", 1, "distance", 0.5,
                          "topks", 3);
    json_t *arr[1] = { a };
    ASSERT(sx__shard_merge_search(arr, 1, 1, 10, 0, false) == NULL);
    json_decref(a);
    /* an answer without topks holds one query's hits */
    a = json_pack("{s:i,s:[{s:i,s:f},{s:i,s:f}]}", "code", 0, "data", "id", 1, "distance", 0.5,
                  "id", 2, "distance", 0.7);
    json_t *b = json_pack("{s:i,s:[{s:i,s:f}]}", "code", 0, "data", "id", 3, "distance", 0.6);
    json_t *two[2] = { a, b };
    ASSERT_EQ(sx__shard_search_order(two, 2), 0);
    json_t *out = sx__shard_merge_search(two, 2, 1, 2, 0, false);
    ASSERT(out);
    ASSERT_EQ(
        json_integer_value(json_object_get(json_array_get(json_object_get(out, "data"), 1), "id")),
        3);
    json_decref(out);
    json_decref(a);
    json_decref(b);
}

static void test_query_merge(void)
{
    json_t *a = json_pack("{s:i,s:[{s:I}]}", "code", 0, "data", "count(*)", (json_int_t)7);
    json_t *b = json_pack("{s:i,s:[{s:I}]}", "code", 0, "data", "count(*)", (json_int_t)5);
    json_t *ab[2] = { a, b };
    json_t *out = sx__shard_merge_query(ab, 2, "id", false, 0, 0);
    ASSERT_EQ(json_integer_value(
                  json_object_get(json_array_get(json_object_get(out, "data"), 0), "count(*)")),
              12);
    json_decref(out);
    json_decref(a);
    json_decref(b);

    /* rows from three shards (each in key order, as a shard's rows inserted in key order are),
     * merged by key, then the window */
    json_t *sh[3];
    for (int s = 0; s < 3; s++)
        sh[s] = json_pack("{s:i,s:[]}", "code", 0, "data");
    for (int i = 0; i < 60; i++)
        json_array_append_new(json_object_get(sh[(i * 7) % 3], "data"),
                              json_pack("{s:i,s:i}", "id", i, "v", i));
    out = sx__shard_merge_query(sh, 3, "id", true, 10, 20);
    const json_t *d = json_object_get(out, "data");
    ASSERT_EQ(json_array_size(d), (size_t)10);
    for (int i = 0; i < 10; i++)
        ASSERT_EQ(json_integer_value(json_object_get(json_array_get(d, (size_t)i), "id")), 20 + i);
    json_decref(out);
    out = sx__shard_merge_query(sh, 3, "id", false, 0, 0);
    ASSERT_EQ(json_array_size(json_object_get(out, "data")), (size_t)60);
    json_decref(out);
    out = sx__shard_merge_query(sh, 3, "id", true, 10, 55);
    ASSERT_EQ(json_array_size(json_object_get(out, "data")), (size_t)5);
    json_decref(out);
    for (int s = 0; s < 3; s++)
        json_decref(sh[s]);

    /* pages cut from growing windows of shards whose rows are not in key order (a shard answers
     * in its insertion order): every row exactly once */
    {
        const int s0[] = { 5, 1, 9, 3 }, s1[] = { 2, 8, 4 };
        int seen[10] = { 0 };
        for (size_t off = 0; off < 7; off++) {
            json_t *p0 = json_pack("{s:i,s:[]}", "code", 0, "data");
            json_t *p1 = json_pack("{s:i,s:[]}", "code", 0, "data");
            for (size_t i = 0; i < 4 && i < off + 1; i++) /* each shard: its first off + 1 */
                json_array_append_new(json_object_get(p0, "data"), json_pack("{s:i}", "id", s0[i]));
            for (size_t i = 0; i < 3 && i < off + 1; i++)
                json_array_append_new(json_object_get(p1, "data"), json_pack("{s:i}", "id", s1[i]));
            json_t *pp[2] = { p0, p1 };
            out = sx__shard_merge_query(pp, 2, "id", true, 1, off);
            d = json_object_get(out, "data");
            ASSERT_EQ(json_array_size(d), (size_t)1);
            seen[json_integer_value(json_object_get(json_array_get(d, 0), "id"))]++;
            json_decref(out);
            json_decref(p0);
            json_decref(p1);
        }
        const int all[] = { 1, 2, 3, 4, 5, 8, 9 };
        for (size_t i = 0; i < 7; i++)
            ASSERT_EQ(seen[all[i]], 1);
    }

    /* count(*) as text (Accept-Type-Allow-Int64) sums too */
    a = json_pack("{s:i,s:[{s:s}]}", "code", 0, "data", "count(*)", "40");
    b = json_pack("{s:i,s:[{s:I}]}", "code", 0, "data", "count(*)", (json_int_t)2);
    ab[0] = a;
    ab[1] = b;
    out = sx__shard_merge_query(ab, 2, "id", false, 0, 0);
    ASSERT_EQ(json_integer_value(
                  json_object_get(json_array_get(json_object_get(out, "data"), 0), "count(*)")),
              42);
    json_decref(out);
    json_decref(a);
    json_decref(b);

    /* load state: the least advanced shard's */
    a = json_pack("{s:i,s:{s:s}}", "code", 0, "data", "loadState", "LoadStateLoaded");
    b = json_pack("{s:i,s:{s:s,s:i}}", "code", 0, "data", "loadState", "LoadStateLoading",
                  "loadProgress", 40);
    ab[0] = a;
    ab[1] = b;
    out = sx__shard_merge_load(ab, 2);
    ASSERT(strcmp(json_string_value(json_object_get(json_object_get(out, "data"), "loadState")),
                  "LoadStateLoading") == 0);
    json_decref(out);
    json_decref(a);
    json_decref(b);

    /* string keys */
    a = json_pack("{s:i,s:[{s:s},{s:s}]}", "code", 0, "data", "pk", "b", "pk", "d");
    b = json_pack("{s:i,s:[{s:s}]}", "code", 0, "data", "pk", "a");
    ab[0] = a;
    ab[1] = b;
    out = sx__shard_merge_query(ab, 2, "pk", false, 0, 0);
    d = json_object_get(out, "data");
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(d, 0), "pk")), "a") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(json_array_get(d, 2), "pk")), "d") == 0);
    json_decref(out);
    json_decref(a);
    json_decref(b);

    /* an index: row counts summed, the state of the shard still building */
    a = json_pack("{s:i,s:[{s:s,s:i,s:i,s:s}]}", "code", 0, "data", "indexName", "v", "totalRows",
                  10, "indexedRows", 10, "indexState", "Finished");
    b = json_pack("{s:i,s:[{s:s,s:i,s:i,s:s}]}", "code", 0, "data", "indexName", "v", "totalRows",
                  7, "indexedRows", 3, "indexState", "InProgress");
    ab[0] = a;
    ab[1] = b;
    out = sx__shard_merge_index(ab, 2);
    const json_t *e = json_array_get(json_object_get(out, "data"), 0);
    ASSERT_EQ(json_integer_value(json_object_get(e, "totalRows")), 17);
    ASSERT_EQ(json_integer_value(json_object_get(e, "indexedRows")), 13);
    ASSERT(strcmp(json_string_value(json_object_get(e, "indexState")), "InProgress") == 0);
    json_decref(out);
    json_decref(a);
    json_decref(b);

    a = json_pack("{s:i,s:{s:i}}", "code", 0, "data", "rowCount", 40);
    b = json_pack("{s:i,s:{s:i}}", "code", 0, "data", "rowCount", 2);
    ab[0] = a;
    ab[1] = b;
    out = sx__shard_sum(ab, 2, "rowCount");
    ASSERT_EQ(json_integer_value(json_object_get(json_object_get(out, "data"), "rowCount")), 42);
    json_decref(out);
    json_decref(a);
    json_decref(b);
}

int main(void)
{
    seed = test_seed();
    RUN(test_names);
    RUN(test_placement);
    RUN(test_replica_holders);
    RUN(test_search_merge);
    RUN(test_query_merge);
    return TEST_DONE();
}
