/*
 * bench_generate.h: `sextant bench generate` (bench_generate.c): a generated dataset and its
 * exact ground truth written to files, in bounded memory.
 */
#ifndef SX_TOOLS_BENCH_GENERATE_H
#define SX_TOOLS_BENCH_GENERATE_H

/* argv[0] is "generate". Returns a CLI_EXIT_* code. */
int cli_bench_generate(int argc, char **argv);

#endif
