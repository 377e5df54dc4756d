/*
 * test_bench_metrics.c: the statistics of `sextant bench` (tools/sextant/bench_metrics.c) against
 * hand-computed values: distance-threshold recall (ties at the k-th distance count, as in
 * ann-benchmarks), id-set recall, VectorDBBench's NDCG (discount by ground-truth rank, distinct
 * returned ids), and nearest-rank percentiles on small arrays (n = 1, duplicates, n = 0).
 *
 * tools/ is not part of the library, so the pure-C file is compiled into this test by including
 * it (it depends on libc and libm only).
 */
#include <math.h>
#include <stdint.h>

#include "../../tools/sextant/bench_metrics.c"
#include "harness.h"

#define EPS 1e-12

static void test_recall_threshold(void)
{
    /* true distances 1, 2, 3, 3 (k = 4): the threshold is 3 + 1e-3 */
    const float gt[4] = { 1, 2, 3, 3 };
    const float all[4] = { 1, 2, 3, 3.0005f };
    ASSERT_NEAR(bm_recall_threshold(all, 4, gt, 4, false, BM_RECALL_EPS), 1.0, EPS);
    const float far[4] = { 1, 2, 3, 3.01f };
    ASSERT_NEAR(bm_recall_threshold(far, 4, gt, 4, false, BM_RECALL_EPS), 0.75, EPS);
    /* two answers of four: the missing ones are misses */
    ASSERT_NEAR(bm_recall_threshold(all, 2, gt, 4, false, BM_RECALL_EPS), 0.5, EPS);
    /* rows past k are ignored: k = 2 uses d_2 = 2 and the first two answers */
    const float late[4] = { 1, 5, 1, 1 };
    ASSERT_NEAR(bm_recall_threshold(late, 4, gt, 2, false, BM_RECALL_EPS), 0.5, EPS);
    /* similarities: higher is better, the test is d >= d_k - eps */
    const float gts[3] = { 0.9f, 0.8f, 0.7f };
    const float sims[4] = { 0.9f, 0.7f, 0.6995f, 0.5f };
    ASSERT_NEAR(bm_recall_threshold(sims, 4, gts, 3, true, BM_RECALL_EPS), 1.0, EPS);
    const float sims2[3] = { 0.9f, 0.69f, 0.1f };
    ASSERT_NEAR(bm_recall_threshold(sims2, 3, gts, 3, true, BM_RECALL_EPS), 1.0 / 3.0, EPS);
    ASSERT_NEAR(bm_recall_threshold(all, 4, gt, 0, false, BM_RECALL_EPS), 0.0, EPS);
}

static void test_ties_at_k(void)
{
    /* The ground truth lists ids 5, 6, 7 at distances 1, 2, 2; the answer returns 8 instead of 7,
     * also at distance 2 (a tie at the k-th distance). Threshold recall counts it, the id set
     * and NDCG do not. */
    const int32_t gt_ids[3] = { 5, 6, 7 };
    const float gt_d[3] = { 1, 2, 2 };
    const int64_t got[3] = { 5, 6, 8 };
    const float got_d[3] = { 1, 2, 2 };
    ASSERT_NEAR(bm_recall_threshold(got_d, 3, gt_d, 3, false, BM_RECALL_EPS), 1.0, EPS);
    ASSERT_NEAR(bm_recall_ids(got, 3, gt_ids, 3), 2.0 / 3.0, EPS);
    /* (1 + 1/log2 3) / (1 + 1/log2 3 + 1/2) */
    double want = (1.0 + 1.0 / log2(3.0)) / (1.0 + 1.0 / log2(3.0) + 0.5);
    ASSERT_NEAR(bm_ndcg(got, 3, gt_ids, 3), want, EPS);
    ASSERT_NEAR(want, 0.7653606369886217, 1e-12);
}

static void test_recall_ids(void)
{
    const int32_t gt[4] = { 10, 20, 30, 40 };
    const int64_t got[4] = { 40, 99, 10, -1 };
    ASSERT_NEAR(bm_recall_ids(got, 4, gt, 4), 0.5, EPS);
    /* duplicates in the answer count once */
    const int64_t dup[4] = { 10, 10, 10, 20 };
    ASSERT_NEAR(bm_recall_ids(dup, 4, gt, 4), 0.5, EPS);
    /* only the first k answers are looked at */
    const int64_t shifted[4] = { 1, 2, 10, 20 };
    ASSERT_NEAR(bm_recall_ids(shifted, 4, gt, 2), 0.0, EPS);
    ASSERT_NEAR(bm_recall_ids(got, 0, gt, 4), 0.0, EPS);
}

static void test_ndcg(void)
{
    ASSERT_NEAR(bm_ideal_dcg(0), 0.0, EPS);
    ASSERT_NEAR(bm_ideal_dcg(1), 1.0, EPS);
    ASSERT_NEAR(bm_ideal_dcg(2), 1.0 + 1.0 / log2(3.0), EPS);
    ASSERT_NEAR(bm_ideal_dcg(3), 2.1309297535714573, 1e-12);
    const int32_t gt[3] = { 1, 2, 3 };
    const int64_t perfect[3] = { 1, 2, 3 };
    ASSERT_NEAR(bm_ndcg(perfect, 3, gt, 3), 1.0, EPS);
    /* VectorDBBench discounts by the ground-truth rank, so the answer's order does not matter */
    const int64_t reversed[3] = { 3, 2, 1 };
    ASSERT_NEAR(bm_ndcg(reversed, 3, gt, 3), 1.0, EPS);
    /* one hit, the true first neighbour, returned three times: counted once */
    const int64_t dup[3] = { 1, 1, 1 };
    ASSERT_NEAR(bm_ndcg(dup, 3, gt, 3), 1.0 / 2.1309297535714573, 1e-12);
    /* only the true 3rd neighbour: (1/log2 4) / IDCG(3) = 0.5 / 2.13093 */
    const int64_t third[3] = { 7, 3, 8 };
    ASSERT_NEAR(bm_ndcg(third, 3, gt, 3), 0.5 / 2.1309297535714573, 1e-12);
    const int64_t none[3] = { 7, 8, 9 };
    ASSERT_NEAR(bm_ndcg(none, 3, gt, 3), 0.0, EPS);
    /* fewer answers than k */
    ASSERT_NEAR(bm_ndcg(perfect, 1, gt, 3), 1.0 / 2.1309297535714573, 1e-12);
    /* a large k goes through the sorted path the same way */
    int32_t big_gt[200];
    int64_t big_got[200];
    for (int j = 0; j < 200; j++) {
        big_gt[j] = j * 3;
        big_got[j] = (int64_t)(199 - j) * 3;
    }
    ASSERT_NEAR(bm_ndcg(big_got, 200, big_gt, 200), 1.0, 1e-12);
    ASSERT_NEAR(bm_recall_ids(big_got, 200, big_gt, 200), 1.0, EPS);
    big_got[0] = 1; /* replaces id 597 (gt rank 199) by a non-neighbour */
    ASSERT_NEAR(bm_recall_ids(big_got, 200, big_gt, 200), 199.0 / 200.0, EPS);
    ASSERT_NEAR(bm_ndcg(big_got, 200, big_gt, 200),
                (bm_ideal_dcg(200) - 1.0 / log2(201.0)) / bm_ideal_dcg(200), 1e-12);
}

static void test_percentiles(void)
{
    double one[1] = { 5 };
    ASSERT_NEAR(bm_percentile(one, 1, 0.50), 5, EPS);
    ASSERT_NEAR(bm_percentile(one, 1, 0.99), 5, EPS);
    ASSERT_NEAR(bm_percentile(one, 1, 0.0), 5, EPS);
    double four[4] = { 4, 2, 3, 1 };
    bm_sort(four, 4);
    ASSERT_NEAR(four[0], 1, EPS);
    ASSERT_NEAR(four[3], 4, EPS);
    ASSERT_NEAR(bm_percentile(four, 4, 0.25), 1, EPS); /* ceil(1.0) = rank 1 */
    ASSERT_NEAR(bm_percentile(four, 4, 0.50), 2, EPS); /* ceil(2.0) = rank 2 */
    ASSERT_NEAR(bm_percentile(four, 4, 0.51), 3, EPS); /* ceil(2.04) = rank 3 */
    ASSERT_NEAR(bm_percentile(four, 4, 0.95), 4, EPS); /* ceil(3.8) = rank 4 */
    ASSERT_NEAR(bm_percentile(four, 4, 1.00), 4, EPS);
    double dup[6] = { 2, 9, 1, 2, 1, 2 };
    bm_sort(dup, 6);                                  /* 1 1 2 2 2 9 */
    ASSERT_NEAR(bm_percentile(dup, 6, 0.50), 2, EPS); /* rank 3 */
    ASSERT_NEAR(bm_percentile(dup, 6, 0.30), 1, EPS); /* ceil(1.8) = rank 2 */
    ASSERT_NEAR(bm_percentile(dup, 6, 0.95), 9, EPS); /* ceil(5.7) = rank 6 */
    ASSERT_NEAR(bm_percentile(dup, 6, 0.99), 9, EPS);
    double hundred[100];
    for (int j = 0; j < 100; j++)
        hundred[j] = 100 - j;
    bm_sort(hundred, 100);
    ASSERT_NEAR(bm_percentile(hundred, 100, 0.50), 50, EPS);
    ASSERT_NEAR(bm_percentile(hundred, 100, 0.95), 95, EPS);
    ASSERT_NEAR(bm_percentile(hundred, 100, 0.99), 99, EPS);
    ASSERT(isnan(bm_percentile(hundred, 0, 0.5)));
    ASSERT_NEAR(bm_mean(four, 4), 2.5, EPS);
    ASSERT(isnan(bm_mean(four, 0)));
    /* NaNs sort last and do not disturb the others */
    double withnan[3] = { NAN, 3, 1 };
    bm_sort(withnan, 3);
    ASSERT_NEAR(withnan[0], 1, EPS);
    ASSERT_NEAR(withnan[1], 3, EPS);
    ASSERT(isnan(withnan[2]));
}

/* QPS at recall t interpolated between bracketing runs, as the console and the report use. */
static void test_qps_at_recall(void)
{
    /* ef=10: 0.93 @ 20000, ef=20: 0.98 @ 12000, ef=40: 0.995 @ 7000 */
    const double r[] = { 0.93, 0.98, 0.995 }, q[] = { 20000, 12000, 7000 };
    /* best bracketing pair for 0.95 is (0.93, 0.98): 20000 - 8000 * 0.02 / 0.05 = 16800; the
     * pair (0.93, 0.995) gives 20000 - 13000 * 0.02 / 0.065 = 16000 */
    ASSERT_NEAR(bm_qps_at_recall(r, q, 3, 0.95), 16800.0, 1e-6);
    ASSERT_NEAR(bm_qps_at_recall(r, q, 3, 0.98), 12000.0, 1e-6); /* a run exactly at t */
    ASSERT(isnan(bm_qps_at_recall(r, q, 3, 0.90)));              /* every run above t */
    ASSERT(isnan(bm_qps_at_recall(r, q, 3, 0.999)));             /* every run below t */
    ASSERT(isnan(bm_qps_at_recall(r, q, 0, 0.95)));
    const double rn[] = { 0.93, (double)NAN, 0.98 }, qn[] = { 20000, 1e9, 12000 };
    ASSERT_NEAR(bm_qps_at_recall(rn, qn, 3, 0.95), 16800.0, 1e-6);
}

int main(void)
{
    RUN(test_recall_threshold);
    RUN(test_ties_at_k);
    RUN(test_recall_ids);
    RUN(test_ndcg);
    RUN(test_percentiles);
    RUN(test_qps_at_recall);
    return TEST_DONE();
}
