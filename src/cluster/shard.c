/*
 * shard.c: shard names, row placement by primary key and the merge of shard answers for the
 * cluster proxy (the rules are in shard.h). Thread-safety: none needed (pure functions).
 */
#include "cluster/shard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/err.h"
#include "util/hash.h"

bool sx__shard_name(const char *base, unsigned k, char *out, size_t cap)
{
    int w = snprintf(out, cap, "%s__s%u", base, k);
    return w > 0 && (size_t)w < cap;
}

bool sx__shard_parse(const char *name, char *base, size_t cap, unsigned *k)
{
    const char *s = name ? strstr(name, "__s") : NULL;
    const char *last = NULL;
    while (s) { /* the last "__s" */
        last = s;
        s = strstr(s + 1, "__s");
    }
    if (!last || last == name || !last[3])
        return false;
    unsigned v = 0;
    for (const char *d = last + 3; *d; d++) {
        if (*d < '0' || *d > '9' || v > 100000u)
            return false;
        v = v * 10u + (unsigned)(*d - '0');
    }
    if (k)
        *k = v;
    if (base && cap) {
        size_t l = (size_t)(last - name);
        if (l >= cap)
            return false;
        memcpy(base, name, l);
        base[l] = 0;
    }
    return true;
}

uint32_t sx__shard_str_hash(const char *s)
{
    return (uint32_t)sx__hash_str(s);
}

int sx__shard_of_pk(const json_t *pk, unsigned n)
{
    if (n == 0)
        return -1;
    if (json_is_integer(pk))
        return (int)sx__key_bucket((int64_t)json_integer_value(pk), NULL, n);
    if (json_is_string(pk))
        return (int)sx__key_bucket(0, json_string_value(pk), n);
    return -1;
}

sx_status
sx__shard_split_rows(const json_t *rows, const char *pk, unsigned n, json_t **out, size_t *bad)
{
    if (!json_is_array(rows) || n == 0 || n > SX__SHARD_MAX)
        return sx__err(SX_EINVAL, "rows must be an array");
    size_t i;
    json_t *row;
    json_array_foreach(rows, i, row) {
        if (sx__shard_of_pk(json_object_get(row, pk), n) < 0) {
            if (bad)
                *bad = i;
            return sx__err(SX_EINVAL, "row %zu: no integer or string value for the primary key %s",
                           i, pk);
        }
    }
    for (unsigned k = 0; k < n; k++) {
        out[k] = json_array();
        if (!out[k]) {
            for (unsigned m = 0; m < k; m++)
                json_decref(out[m]);
            return sx__err(SX_ENOMEM, "split rows");
        }
    }
    json_array_foreach(rows, i, row) {
        int k = sx__shard_of_pk(json_object_get(row, pk), n);
        if (json_array_append(out[k], row) != 0) {
            for (unsigned m = 0; m < n; m++)
                json_decref(out[m]);
            return sx__err(SX_ENOMEM, "split rows");
        }
    }
    return SX_OK;
}

/* Per-query slices of one answer: start[q], len[q]. false when topks and data disagree. */
static bool slices(const json_t *a, size_t nq, size_t *start, size_t *len)
{
    const json_t *data = json_object_get(a, "data");
    const json_t *tk = json_object_get(a, "topks");
    size_t total = json_array_size(data), at = 0;
    if (!tk) { /* one query: every hit is its */
        if (nq != 1 && total != 0)
            return false;
        memset(start, 0, nq * sizeof *start);
        memset(len, 0, nq * sizeof *len);
        len[0] = total;
        return true;
    }
    if (json_array_size(tk) != nq)
        return false;
    for (size_t q = 0; q < nq; q++) {
        json_int_t t = json_integer_value(json_array_get(tk, q));
        if (t < 0 || at + (size_t)t > total)
            return false;
        start[q] = at;
        len[q] = (size_t)t;
        at += (size_t)t;
    }
    return at == total;
}

static double dist_of(const json_t *row)
{
    return json_number_value(json_object_get(row, "distance"));
}

int sx__shard_search_order(json_t *const *ans, unsigned n)
{
    for (unsigned s = 0; s < n; s++) {
        const json_t *data = json_object_get(ans[s], "data");
        const json_t *tk = json_object_get(ans[s], "topks");
        size_t nq = tk ? json_array_size(tk) : 1, at = 0;
        for (size_t q = 0; q < nq; q++) {
            size_t t =
                tk ? (size_t)json_integer_value(json_array_get(tk, q)) : json_array_size(data);
            if (t >= 2 && at + t <= json_array_size(data)) {
                double a = dist_of(json_array_get(data, at));
                double b = dist_of(json_array_get(data, at + t - 1));
                if (a != b)
                    return a > b ? 1 : 0;
            }
            at += t;
        }
    }
    return -1;
}

json_t *sx__shard_merge_search(
    json_t *const *ans, unsigned n, size_t nq, size_t limit, size_t offset, bool larger_better)
{
    if (n == 0 || n > SX__SHARD_MAX || nq == 0)
        return NULL;
    size_t *start = sx__calloc((size_t)n * nq, sizeof *start);
    size_t *len = sx__calloc((size_t)n * nq, sizeof *len);
    json_t *data = json_array(), *topks = json_array(), *out = NULL;
    bool ok = start && len && data && topks;
    double cost = 0;
    for (unsigned s = 0; ok && s < n; s++) {
        ok = slices(ans[s], nq, start + (size_t)s * nq, len + (size_t)s * nq);
        cost += json_number_value(json_object_get(ans[s], "cost"));
    }
    for (size_t q = 0; ok && q < nq; q++) {
        size_t pos[SX__SHARD_MAX] = { 0 }, kept = 0, seen = 0;
        while (ok && kept < limit) {
            int best = -1;
            double bd = 0;
            for (unsigned s = 0; s < n; s++) {
                size_t i = (size_t)s * nq + q;
                if (pos[s] >= len[i])
                    continue;
                double d =
                    dist_of(json_array_get(json_object_get(ans[s], "data"), start[i] + pos[s]));
                if (best < 0 || (larger_better ? d > bd : d < bd)) {
                    best = (int)s;
                    bd = d;
                }
            }
            if (best < 0)
                break;
            size_t i = (size_t)best * nq + q;
            json_t *row = json_array_get(json_object_get(ans[best], "data"), start[i] + pos[best]);
            pos[best]++;
            if (seen++ < offset)
                continue;
            ok = json_array_append(data, row) == 0;
            kept++;
        }
        ok = ok && json_array_append_new(topks, json_integer((json_int_t)kept)) == 0;
    }
    if (ok)
        out = json_pack("{s:i,s:O,s:O,s:f}", "code", 0, "data", data, "topks", topks, "cost", cost);
    json_decref(data);
    json_decref(topks);
    sx__free(start);
    sx__free(len);
    return out;
}

static int cmp_pk(const json_t *a, const json_t *b)
{
    bool ia = json_is_integer(a), ib = json_is_integer(b);
    if (ia && ib) {
        json_int_t x = json_integer_value(a), y = json_integer_value(b);
        return x < y ? -1 : x > y;
    }
    if (ia != ib)
        return ia ? -1 : 1;
    const char *x = json_string_value(a), *y = json_string_value(b);
    if (!x || !y)
        return (x != NULL) - (y != NULL);
    return strcmp(x, y);
}

/* A count(*) value: an integer, or an integer as text (Accept-Type-Allow-Int64). */
static bool count_of(const json_t *row, json_int_t *out)
{
    const json_t *v = json_object_size(row) == 1 ? json_object_get(row, "count(*)") : NULL;
    if (json_is_integer(v)) {
        *out = json_integer_value(v);
        return true;
    }
    const char *t = json_string_value(v);
    char *end = NULL;
    if (!t || !*t)
        return false;
    long long x = strtoll(t, &end, 10);
    if (*end)
        return false;
    *out = (json_int_t)x;
    return true;
}

json_t *sx__shard_merge_query(
    json_t *const *ans, unsigned n, const char *pk, bool has_limit, size_t limit, size_t offset)
{
    if (n > SX__SHARD_MAX)
        return NULL;
    bool counts = n > 0;
    double cost = 0;
    json_int_t sum = 0;
    for (unsigned s = 0; s < n; s++) {
        const json_t *d = json_object_get(ans[s], "data");
        cost += json_number_value(json_object_get(ans[s], "cost"));
        json_int_t v = 0;
        counts = counts && json_array_size(d) == 1 && count_of(json_array_get(d, 0), &v);
        sum += v;
    }
    json_t *data = json_array();
    if (!data)
        return NULL;
    bool ok = true;
    if (counts) {
        json_t *r = json_pack("{s:I}", "count(*)", (json_int_t)sum);
        ok = r && json_array_append_new(data, r) == 0;
    } else {
        /* k-way merge by the heads' keys (each list keeps its shard's order) */
        size_t pos[SX__SHARD_MAX] = { 0 }, seen = 0, kept = 0;
        while (ok && (!has_limit || kept < limit)) {
            int best = -1;
            const json_t *bk = NULL;
            for (unsigned s = 0; s < n; s++) {
                const json_t *d = json_object_get(ans[s], "data");
                if (pos[s] >= json_array_size(d))
                    continue;
                const json_t *k = json_object_get(json_array_get(d, pos[s]), pk);
                if (best < 0 || cmp_pk(k, bk) < 0) {
                    best = (int)s;
                    bk = k;
                }
            }
            if (best < 0)
                break;
            json_t *row = json_array_get(json_object_get(ans[best], "data"), pos[best]++);
            if (seen++ < offset)
                continue;
            ok = json_array_append(data, row) == 0;
            kept++;
        }
    }
    if (!ok) {
        json_decref(data);
        return NULL;
    }
    return json_pack("{s:i,s:o,s:f}", "code", 0, "data", data, "cost", cost);
}

json_t *sx__shard_merge_load(json_t *const *ans, unsigned n)
{
    static const char *const order[] = { "LoadStateNotExist", "LoadStateNotLoad",
                                         "LoadStateLoading", "LoadStateLoaded" };
    int worst = -1;
    size_t rank = sizeof order / sizeof order[0];
    for (unsigned s = 0; s < n; s++) {
        const char *st =
            json_string_value(json_object_get(json_object_get(ans[s], "data"), "loadState"));
        size_t r = 0;
        while (st && r < sizeof order / sizeof order[0] && strcmp(st, order[r]) != 0)
            r++;
        if (worst < 0 || r < rank) {
            worst = (int)s;
            rank = r;
        }
    }
    return worst < 0 ? NULL : json_deep_copy(ans[worst]);
}

json_t *sx__shard_sum(json_t *const *ans, unsigned n, const char *key)
{
    json_t *out = n ? json_deep_copy(ans[0]) : NULL;
    json_t *d = json_object_get(out, "data");
    if (!json_is_object(d))
        return out;
    json_int_t sum = 0;
    for (unsigned s = 0; s < n; s++)
        sum += json_integer_value(json_object_get(json_object_get(ans[s], "data"), key));
    json_object_set_new(d, key, json_integer(sum));
    return out;
}

json_t *sx__shard_merge_index(json_t *const *ans, unsigned n)
{
    json_t *out = n ? json_deep_copy(ans[0]) : NULL;
    json_t *d = json_object_get(out, "data");
    static const char *const counts[] = { "totalRows", "indexedRows", "pendingRows",
                                          "growingRows" };
    size_t i;
    json_t *e;
    json_array_foreach(d, i, e) {
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            if (!json_is_integer(json_object_get(e, counts[c])))
                continue;
            json_int_t sum = 0;
            for (unsigned s = 0; s < n; s++)
                sum += json_integer_value(
                    json_object_get(json_array_get(json_object_get(ans[s], "data"), i), counts[c]));
            json_object_set_new(e, counts[c], json_integer(sum));
        }
        for (unsigned s = 1; s < n; s++) {
            const json_t *o = json_array_get(json_object_get(ans[s], "data"), i);
            const char *st = json_string_value(json_object_get(o, "indexState"));
            const char *mine = json_string_value(json_object_get(e, "indexState"));
            if (st && strcmp(st, "Finished") != 0 && (!mine || strcmp(mine, "Finished") == 0)) {
                json_object_set_new(e, "indexState", json_string(st));
                const json_t *why = json_object_get(o, "failReason");
                if (why)
                    json_object_set(e, "failReason", (json_t *)why);
            }
        }
    }
    return out;
}

size_t sx__replica_holders(
    const char *db, const char *name, const char *const *ids, size_t n, unsigned r, size_t *out)
{
    size_t want = r == 0 || r > n ? n : r;
    uint32_t best[64];
    size_t k = 0;
    if (want > 64)
        want = 64;
    for (size_t i = 0; i < n; i++) {
        char key[700];
        (void)snprintf(key, sizeof key, "%s/%s@%s", db, name, ids[i]);
        uint32_t h = sx__shard_str_hash(key);
        /* insertion into the top `want` (score descending, ties by index) */
        size_t pos = k;
        while (pos > 0 && best[pos - 1] < h)
            pos--;
        if (pos >= want)
            continue;
        size_t last = k < want ? k : want - 1;
        for (size_t j = last; j > pos; j--) {
            best[j] = best[j - 1];
            out[j] = out[j - 1];
        }
        best[pos] = h;
        out[pos] = i;
        if (k < want)
            k++;
    }
    return k;
}
