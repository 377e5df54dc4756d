/*
 * bench_cases.h: the concurrent phases of `sextant bench`'s VectorDBBench-style cases, written
 * against callbacks so that they know nothing of the engine (bench.c supplies the search, the
 * insert and the scoring):
 *
 *   bc_run_level   one concurrency level: N threads search back to back for a duration, one
 *                  query per call, printing Milvus Go-benchmark blocks (bench_print.h) every
 *                  interval; requests, failures, QPS, latency avg/min/max/p50/p95/p99, recall
 *   bc_run_stream  the streaming case: the calling thread inserts rows at a fixed rate while N
 *                  threads search; results per stage (each 1/S of the rows), each search scored
 *                  against the stage that was complete when it started
 *
 * Threading. Workers take queries round-robin from their own cursor (worker t of N starts at
 * query t * nq / N so they do not search the same vectors in lockstep). Each worker appends its
 * latencies to its own log: chunks of LOG_CHUNK values behind a fixed pointer table, written
 * with plain stores and published by a release store of the count; the reporter thread
 * acquire-loads the count and reads only entries below it (never rewritten), so no lock is
 * taken on the search path. Recall sums and failure counts are worker-private until
 * pthread_join publishes them to the caller. The stop flag and the current stage are relaxed
 * atomics (they only need to become visible eventually; no data is published through them).
 *
 * Thread-safety of the callbacks: `search` and `score` are called from every worker at once;
 * `insert` only from the calling thread.
 */
#ifndef SX_TOOLS_BENCH_CASES_H
#define SX_TOOLS_BENCH_CASES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One search of query q: up to k hits (ids, distances) and their count. 0, or -1 with err. */
typedef int (*bc_search_fn)(
    void *ctx, size_t q, int64_t *ids, float *dists, size_t *n_out, char *err, size_t err_len);
/* Recall of one answer to query q (stage: the streaming stage, 0 otherwise); NAN = unscored. */
typedef double (*bc_score_fn)(
    void *ctx, unsigned stage, size_t q, const int64_t *ids, const float *dists, size_t n);
/* Inserts rows [row0, row0 + n). 0, or -1 with err. */
typedef int (*bc_insert_fn)(void *ctx, size_t row0, size_t n, char *err, size_t err_len);
/* Rows the index covers now (stage reports); may be NULL. */
typedef uint64_t (*bc_indexed_fn)(void *ctx);

typedef struct bc_stats {
    uint64_t requests, failures;
    double elapsed_s, qps, recall; /* recall NAN when nothing was scored */
    double avg_ms, min_ms, max_ms, p50_ms, p95_ms, p99_ms;
} bc_stats;

typedef struct bc_level_spec {
    unsigned conc;
    double duration_s, interval_s;
    size_t nq, k;
    bc_search_fn search;
    bc_score_fn score; /* may be NULL */
    void *ctx;
} bc_level_spec;

/* Runs one level; prints the periodic blocks, the final block and a summary line on stdout.
 * Returns 0 (failed searches are counted, not fatal), or -1 with err (threads, memory). */
int bc_run_level(const bc_level_spec *spec, bc_stats *out, char *err, size_t err_len);

typedef struct bc_stream_spec {
    size_t n_rows, batch;
    double rate; /* rows per second */
    unsigned conc, n_stages;
    size_t nq, k;
    double final_s; /* search time after the last row (the last stage's window) */
    bc_insert_fn insert;
    bc_search_fn search;
    bc_score_fn score; /* stage s (1-based) = rows_s = n_rows * s / n_stages complete */
    bc_indexed_fn indexed;
    void *ctx;
} bc_stream_spec;

typedef struct bc_stage {
    unsigned stage;
    double fraction;
    size_t rows;
    uint64_t indexed_rows;
    bc_stats st;
} bc_stage;

/* Rows acknowledged when stage s (1-based) is complete. */
size_t bc_stage_rows(const bc_stream_spec *spec, unsigned s);

/* Runs the streaming case: stages[n_stages] receive the per-stage results, *insert_s the wall
 * time of the insert. Searches begin when stage 1 is complete. Returns 0, or -1 with err (an
 * insert failed, threads, memory). */
int bc_run_stream(
    const bc_stream_spec *spec, bc_stage *stages, double *insert_s, char *err, size_t err_len);

#endif /* SX_TOOLS_BENCH_CASES_H */
