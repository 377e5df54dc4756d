/*
 * search_eval.h: `sextant search --gt` (search_eval.c): recall, QPS, latency and I/Os per query
 * of an existing collection, per value of a swept search parameter.
 */
#ifndef SX_TOOLS_SEARCH_EVAL_H
#define SX_TOOLS_SEARCH_EVAL_H

#include <sextant.h>
#include <stddef.h>
#include <stdint.h>

#include "datasets.h"

typedef struct search_eval_opts {
    const char *gt;      /* .ivecs of row numbers, best first (required) */
    const char *gt_dist; /* .fvecs of their distances, or NULL (then id-set recall) */
    const char *sweep;   /* "KEY=V1,V2,...", or NULL: one run with params as given */
    unsigned threads;    /* searching threads, >= 1 */
    int64_t id_offset;   /* ground-truth row r is primary key r + id_offset */
    uint32_t k;
} search_eval_opts;

/* Runs the evaluation on c with the queries q (DS_F32) and the constant params (a param named
 * like the swept key is replaced by each swept value). Prints one line per setting to stdout.
 * Returns a CLI_EXIT_* code. */
int search_eval(const search_eval_opts *o,
                sx_collection *c,
                const ds_matrix *q,
                const sx_param *params,
                size_t n_params);

#endif
