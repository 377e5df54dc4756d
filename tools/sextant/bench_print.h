/*
 * bench_print.h: the periodic report lines of Milvus's Go benchmark (milvus-tools `benchmark/`,
 * benchmarks.md §3), shared by the REST load generator (bench_remote.c) and the embedded
 * concurrent search of `sextant bench` (bench_cases.c), so both print the same columns:
 *
 *   [2024-05-01 12:00:05.001] Name      #   reqs      # fails  |       Avg       Min ...
 *   [2024-05-01 12:00:05.001] search       12345     0(0.00%)  |     4.610     1.020 ...
 *
 * Values are cumulative since the level started; latencies in milliseconds, req/s and
 * failures/s over `elapsed_s`. Thread-safety: each call prints whole lines with one stdio call
 * per line (stdout's lock), and flushes.
 */
#ifndef SX_TOOLS_BENCH_PRINT_H
#define SX_TOOLS_BENCH_PRINT_H

#include <stddef.h>
#include <stdint.h>

/* Local wall-clock time as "2024-05-01 12:00:05.001" into buf. */
void bp_stamp(char *buf, size_t len);

/* The two-line block: header and one "search" row. */
void bp_block(uint64_t reqs,
              uint64_t fails,
              double avg_ms,
              double min_ms,
              double max_ms,
              double median_ms,
              double elapsed_s);

#endif /* SX_TOOLS_BENCH_PRINT_H */
