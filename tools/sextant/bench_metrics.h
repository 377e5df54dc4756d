/*
 * bench_metrics.h: the accuracy and latency statistics of `sextant bench` (pure C: libc and libm
 * only, no engine, so the unit test compiles bench_metrics.c directly).
 *
 * Definitions (docs/BENCH-RESULTS.md repeats them; benchmarks.md §1-§2 has the sources):
 *
 *   recall@k, distance threshold (ann-benchmarks `knn_threshold`). With the true neighbour
 *     distances d_1 <= ... <= d_k of a query (any "lower is better" form) and eps = 1e-3:
 *         recall@k = |{ j < min(k, n_got) : got_d[j] <= d_k + eps }| / k
 *     so a hit tied with the k-th true neighbour counts even when the ground truth listed another
 *     id at that distance. For "higher is better" forms (similarities) the test is
 *     got_d[j] >= d_k - eps. Returned rows beyond k are ignored; missing rows count as misses.
 *
 *   recall@k, id set (VectorDBBench `calc_recall`, used when no distances are known):
 *         |{ distinct got[j], j < k } ∩ gt[0:k]| / k
 *
 *   NDCG@k (VectorDBBench `calc_ndcg`): relevance 1 for each distinct returned id among the first
 *     k that is in gt[0:k], discounted by its position in the ground truth (not in the answer):
 *         DCG  = sum over distinct got[j] (j < k) with got[j] = gt[r], r < k, of 1 / log2(r + 2)
 *         IDCG = sum_{r=0}^{k-1} 1 / log2(r + 2)
 *         NDCG@k = DCG / IDCG                                   (1.0 for a perfect answer)
 *     Ids only, as VectorDBBench: a tie at the k-th distance returned instead of the listed id
 *     lowers NDCG slightly while threshold recall counts it.
 *
 *   QPS at recall t, interpolated: over every pair of single-thread runs (a, c) with
 *     recall_a < t < recall_c, qps_a + (qps_c - qps_a) * (t - recall_a) / (recall_c - recall_a);
 *     a run exactly at t counts with its own QPS; the highest of these. Undefined (NAN) when no
 *     pair brackets t: every run above t (the cheapest setting already overshoots) or below it.
 *     The bench console, its JSON (qps_at_recall_0.95) and the HTML report's peer ratios all use
 *     this one definition, so their ratios agree.
 *
 *   Percentile p in (0, 1] of n sorted values, nearest rank: v[ceil(p * n) - 1] (rank clamped to
 *     [1, n]); p50 of {1, 2, 3, 4} is 2, p99 of 100 values is the 99th. n = 0 gives NAN. No
 *     interpolation, so every reported latency was observed.
 *
 * Thread-safety: every function is pure (no shared state).
 */
#ifndef SX_TOOLS_BENCH_METRICS_H
#define SX_TOOLS_BENCH_METRICS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ann-benchmarks' epsilon for the distance threshold. */
#define BM_RECALL_EPS 1e-3

/* Distance-threshold recall@k of one query (definition above). gt_d holds at least k true
 * distances in the same form as got_d, best first. Returns a value in [0, 1]; 0 when k == 0. */
double bm_recall_threshold(const float *got_d,
                           size_t n_got,
                           const float *gt_d,
                           size_t k,
                           bool higher_is_better,
                           double eps);

/* Id-set recall@k of one query: distinct ids of got[0:min(k, n_got)] found in gt[0:k], over k.
 * Negative ids never match. Returns a value in [0, 1]; 0 when k == 0. */
double bm_recall_ids(const int64_t *got, size_t n_got, const int32_t *gt, size_t k);

/* IDCG of k relevant results: sum_{r<k} 1 / log2(r + 2). 0 for k == 0. */
double bm_ideal_dcg(size_t k);

/* NDCG@k of one query (VectorDBBench's definition above). Returns a value in [0, 1]. */
double bm_ndcg(const int64_t *got, size_t n_got, const int32_t *gt, size_t k);

/* Sorts n doubles ascending in place (NaNs last). */
void bm_sort(double *v, size_t n);

/* Nearest-rank percentile p (0 < p <= 1; p <= 0 gives the minimum) of n ascending values; NAN
 * when n == 0. */
double bm_percentile(const double *sorted, size_t n, double p);

/* Arithmetic mean of n values; NAN when n == 0. */
double bm_mean(const double *v, size_t n);

/* QPS at recall `target` interpolated (definition above) over the n runs recall[i], qps[i]
 * (single-thread runs only; NaN entries are ignored). NAN when no pair brackets target. */
double bm_qps_at_recall(const double *recall, const double *qps, size_t n, double target);

#endif /* SX_TOOLS_BENCH_METRICS_H */
