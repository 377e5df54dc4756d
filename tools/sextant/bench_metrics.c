/*
 * bench_metrics.c: recall, NDCG and percentiles for `sextant bench` (definitions in
 * bench_metrics.h). Pure C (libc, libm): the unit test compiles this file on its own.
 *
 * Id matching sorts a copy of the ground-truth row (id, rank) by id and binary-searches each
 * returned id, so one query costs O(k log k) rather than O(k^2) at k = 100 and above; the
 * returned ids are de-duplicated the same way (VectorDBBench iterates `set(got)`). When the
 * scratch allocation fails the quadratic scan gives the same answer.
 */
#include "bench_metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double bm_recall_threshold(const float *got_d,
                           size_t n_got,
                           const float *gt_d,
                           size_t k,
                           bool higher_is_better,
                           double eps)
{
    if (k == 0)
        return 0.0;
    double thr = (double)gt_d[k - 1];
    size_t n = n_got < k ? n_got : k, hits = 0;
    for (size_t j = 0; j < n; j++) {
        double d = (double)got_d[j];
        if (higher_is_better ? d >= thr - eps : d <= thr + eps)
            hits++;
    }
    return (double)hits / (double)k;
}

typedef struct id_rank {
    int64_t id;
    size_t rank;
} id_rank;

static int cmp_id_rank(const void *a, const void *b)
{
    const id_rank *x = a, *y = b;
    if (x->id != y->id)
        return x->id < y->id ? -1 : 1;
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* Calls visit(rank, ctx) once per distinct id of got[0:n] that occurs in gt[0:k], with the
 * id's first rank in gt. */
typedef void (*match_fn)(size_t rank, void *ctx);

static void
match_ids(const int64_t *got, size_t n, const int32_t *gt, size_t k, match_fn visit, void *ctx)
{
    id_rank *sorted_gt = malloc(k * sizeof *sorted_gt);
    int64_t *sorted_got = malloc((n ? n : 1) * sizeof *sorted_got);
    if (sorted_gt == NULL || sorted_got == NULL) {
        free(sorted_gt);
        free(sorted_got);
        for (size_t j = 0; j < n; j++) {
            bool dup = false;
            for (size_t i = 0; i < j && !dup; i++)
                dup = got[i] == got[j];
            if (dup)
                continue;
            for (size_t r = 0; r < k; r++) {
                if ((int64_t)gt[r] == got[j]) {
                    visit(r, ctx);
                    break;
                }
            }
        }
        return;
    }
    for (size_t r = 0; r < k; r++)
        sorted_gt[r] = (id_rank){ .id = gt[r], .rank = r };
    qsort(sorted_gt, k, sizeof *sorted_gt, cmp_id_rank);
    memcpy(sorted_got, got, n * sizeof *got);
    qsort(sorted_got, n, sizeof *sorted_got, cmp_i64);
    for (size_t j = 0; j < n; j++) {
        if (j > 0 && sorted_got[j] == sorted_got[j - 1])
            continue;
        /* lower bound of the id: its first (lowest) rank, ranks being the secondary key */
        size_t lo = 0, hi = k;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (sorted_gt[mid].id < sorted_got[j])
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < k && sorted_gt[lo].id == sorted_got[j])
            visit(sorted_gt[lo].rank, ctx);
    }
    free(sorted_gt);
    free(sorted_got);
}

static void count_hit(size_t rank, void *ctx)
{
    (void)rank;
    (*(size_t *)ctx)++;
}

static void add_gain(size_t rank, void *ctx)
{
    *(double *)ctx += 1.0 / log2((double)rank + 2.0);
}

double bm_recall_ids(const int64_t *got, size_t n_got, const int32_t *gt, size_t k)
{
    if (k == 0)
        return 0.0;
    size_t hits = 0;
    match_ids(got, n_got < k ? n_got : k, gt, k, count_hit, &hits);
    return (double)hits / (double)k;
}

double bm_ideal_dcg(size_t k)
{
    double s = 0;
    for (size_t r = 0; r < k; r++)
        s += 1.0 / log2((double)r + 2.0);
    return s;
}

double bm_ndcg(const int64_t *got, size_t n_got, const int32_t *gt, size_t k)
{
    if (k == 0)
        return 0.0;
    double dcg = 0;
    match_ids(got, n_got < k ? n_got : k, gt, k, add_gain, &dcg);
    return dcg / bm_ideal_dcg(k);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y))
        return isnan(x) - isnan(y);
    return (x > y) - (x < y);
}

void bm_sort(double *v, size_t n)
{
    if (n > 1)
        qsort(v, n, sizeof *v, cmp_double);
}

double bm_percentile(const double *sorted, size_t n, double p)
{
    if (n == 0)
        return (double)NAN;
    double r = ceil(p * (double)n);
    size_t rank = r < 1.0 ? 1 : (r > (double)n ? n : (size_t)r);
    return sorted[rank - 1];
}

double bm_mean(const double *v, size_t n)
{
    if (n == 0)
        return (double)NAN;
    double s = 0;
    for (size_t j = 0; j < n; j++)
        s += v[j];
    return s / (double)n;
}

double bm_qps_at_recall(const double *recall, const double *qps, size_t n, double target)
{
    double best = (double)NAN;
    for (size_t i = 0; i < n; i++) {
        if (isnan(recall[i]) || isnan(qps[i]))
            continue;
        if (recall[i] == target)
            best = isnan(best) || qps[i] > best ? qps[i] : best;
        for (size_t j = 0; j < n; j++) {
            if (isnan(recall[j]) || isnan(qps[j]) || !(recall[i] < target && recall[j] > target))
                continue;
            double q = qps[i] + (qps[j] - qps[i]) * (target - recall[i]) / (recall[j] - recall[i]);
            if (isnan(best) || q > best)
                best = q;
        }
    }
    return best;
}
