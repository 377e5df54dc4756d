/*
 * test_deadline_graph.c: the deadline inside graph searches (issue 13, finding 3). A filtered
 * HNSW search whose filter allows one row of 6,000 traverses the whole graph (the results never
 * fill, so the search cannot stop early; graph.h sx__graph_filtered_search): with the calling
 * thread's deadline already passed it must stop with SX_ETIMEDOUT (checked every 1024
 * expansions), and without one it returns that row. The engine hands its caller's deadline to the
 * worker threads that run such searches (query.c run_index_job installs it).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "index/hnsw/hnsw.h"
#include "index/index.h"
#include "util/bitset.h"
#include "util/deadline.h"

#define N   ((size_t)6000)
#define DIM ((size_t)8)

static void filtered_search_times_out(void)
{
    const sx__index_ops *ops = &sx__hnsw_index_ops;
    float *v = malloc(N * DIM * sizeof *v);
    uint64_t *allow = calloc(sx__bits_words(N) + 1, sizeof *allow);
    ASSERT(v && allow);
    uint64_t seed = 5;
    for (size_t i = 0; i < N * DIM; i++)
        v[i] = test_randf(&seed);
    sx__bits_set(allow, N - 1);
    sx_param p[2] = { { "M", "8" }, { "efConstruction", "40" } };
    sx__build_ctx ctx = { .threads = 1 };
    sx__index *idx = NULL;
    ASSERT_OK(ops->build(p, 2, v, N, DIM, SX_METRIC_L2, &ctx, &idx));
    sx__hit out[10];
    sx__topk t;
    sx_param sp = { "ef", "10" };

    sx__topk_init(&t, out, 10);
    ASSERT_OK(ops->search(idx, v, 10, &sp, 1, allow, &t));
    ASSERT_EQ(t.n, 1);
    ASSERT_EQ(t.h[0].id, N - 1);

    int64_t prev = sx_deadline_set(sx_clock_ns());
    sx__topk_init(&t, out, 10);
    sx_status st = ops->search(idx, v, 10, &sp, 1, allow, &t);
    (void)sx_deadline_set(prev);
    if (st != SX_ETIMEDOUT)
        FAILF("filtered search with a passed deadline: %s, want SX_ETIMEDOUT", sx_status_str(st));
    ASSERT(strstr(sx_errmsg(), "deadline exceeded after") != NULL);

    sx__topk_init(&t, out, 10);
    ASSERT_OK(ops->search(idx, v, 10, &sp, 1, allow, &t));
    ASSERT_EQ(t.n, 1);
    ops->free(idx);
    free(v);
    free(allow);
}

int main(void)
{
    RUN(filtered_search_times_out);
    return TEST_DONE();
}
