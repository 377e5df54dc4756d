/*
 * cli.h: helpers shared by the `sextant` subcommands (argument parsing, numbers, metric and
 * parameter lists, error reporting, timing) and the entry points main.c dispatches to.
 *
 * Design. The tool links only the public API (include/sextant.h), so it uses plain libc
 * allocation and never reaches into src/. Options are GNU-style long options, given either as
 * `--name value` or `--name=value`; each subcommand walks argv once with cli_take() and rejects
 * anything it does not know. Exit codes are fixed for scripts:
 *
 *   0  success
 *   1  the operation failed (I/O, bad data file, engine error: message from sx_errmsg())
 *   2  usage error (unknown option, missing or malformed value)
 *
 * Thread-safety: every helper here is reentrant; cli_now() may be called from any thread.
 */
#ifndef SX_TOOLS_CLI_H
#define SX_TOOLS_CLI_H

#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CLI_EXIT_OK    0
#define CLI_EXIT_FAIL  1
#define CLI_EXIT_USAGE 2

/* Most `--param k=v` options accepted on one command line. */
#define CLI_MAX_PARAMS 32

/* Subcommands: each returns one of the CLI_EXIT_* codes. argv[0] is the subcommand name. */
int cli_import(int argc, char **argv);
int cli_import_job(int argc, char **argv); /* import --job (import_job.c): the bulk import */
int cli_search(int argc, char **argv);
int cli_info(int argc, char **argv);
int cli_index(int argc, char **argv);
int cli_bench(int argc, char **argv);
/* `sextant bench --target URL ...`: REST load generator (bench_remote.c); cli_bench dispatches
 * to it when --target is among the options. */
int cli_bench_remote(int argc, char **argv);
/* `sextant serve`: the REST server until SIGTERM/SIGINT (serve.c). */
int cli_serve(int argc, char **argv);
/* `sextant cluster up|status|down`: a local cluster, supervised (cluster.c). */
int cli_cluster(int argc, char **argv);
/* `sextant check DIR [--salvage]`: offline integrity check (check.c). */
int cli_check(int argc, char **argv);

/* Matches argv[*i] against the long option `name` ("--k"). On a match stores the value (the next
 * argument, or the text after '=') in *val, advances *i past the option and returns 1. Returns 0
 * when argv[*i] is not this option and -1 (message printed, naming cmd) when the value is
 * missing. Borrowed: *val points into argv. */
int cli_take(int argc, char **argv, int *i, const char *cmd, const char *name, const char **val);

/* Matches a flag without value (exactly "--name"). Returns true and advances *i on a match. */
bool cli_flag(char **argv, int *i, const char *name);

/* Parses a decimal unsigned integer in [lo, hi]. Returns 0, or -1 with a message naming `what`. */
int cli_parse_u64(
    const char *cmd, const char *what, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/* Parses a byte size: a decimal number with an optional suffix K, M, G, T (powers of 1024;
 * "KiB", "MB", "GiB"... and lower case accepted), or "unlimited"/"none" (SX_MEMORY_UNLIMITED).
 * Must be at least `lo` bytes. Returns 0, or -1 with a message naming `what`. */
int cli_parse_size(const char *cmd, const char *what, const char *s, uint64_t lo, uint64_t *out);

/* Parses "l2", "ip" or "cosine" (case-insensitive). Returns 0 or -1 with a message. */
int cli_parse_metric(const char *cmd, const char *s, sx_metric *out);
/* Returns "l2", "ip" or "cosine". */
const char *cli_metric_name(sx_metric m);

/* A list of key=value parameters. Keys and values are owned by the list. */
typedef struct cli_params {
    sx_param p[CLI_MAX_PARAMS];
    size_t n;
} cli_params;

/* Appends "key=value" (splits at the first '='). A repeated key replaces the earlier value.
 * Returns 0, or -1 with a message (no '=', empty key, list full, out of memory). */
int cli_params_add(cli_params *ps, const char *cmd, const char *kv);
/* Returns the value of key (exact match) or NULL. Borrowed: valid until cli_params_fini. */
const char *cli_params_get(const cli_params *ps, const char *key);
/* Frees the strings; the list is empty afterwards. */
void cli_params_fini(cli_params *ps);

/* Prints "sextant CMD: message" to stderr and returns CLI_EXIT_FAIL. */
int cli_fail(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints "sextant CMD: WHAT: SX_STATUS: sx_errmsg()" and returns CLI_EXIT_FAIL. Call it right
 * after the failing sextant call, before any other sextant call on this thread. */
int cli_sx_fail(const char *cmd, const char *what, sx_status st);
/* Prints "sextant CMD: message" and a hint to run `sextant CMD --help`; returns CLI_EXIT_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For clang-tidy's static analyzer only (`make lint`): it sees one file at a time and would take
 * `return cli_fail(...)` for a possible 0 (success) on every error path. The constant results are
 * spelled out for it; the compiled code calls the functions (cli_common.c undefines these). */
#ifdef __clang_analyzer__
# define cli_fail(...)        (cli_fail(__VA_ARGS__), CLI_EXIT_FAIL)
# define cli_sx_fail(...)     (cli_sx_fail(__VA_ARGS__), CLI_EXIT_FAIL)
# define cli_usage_error(...) (cli_usage_error(__VA_ARGS__), CLI_EXIT_USAGE)
#endif

/* Object-store options shared by import, search, info and serve (sx_db_options.storage_url
 * etc.). Strings are borrowed from argv. */
typedef struct cli_storage {
    const char *url;       /* --storage s3://BUCKET/PREFIX | file:///abs/dir */
    const char *endpoint;  /* --s3-endpoint URL */
    const char *region;    /* --s3-region R */
    uint64_t cache_mb;     /* --cache-mb N */
    uint64_t memory_limit; /* --memory-limit SIZE: sx_db_options.memory_limit_bytes (0: unset,
                            * the cgroup default; SX_MEMORY_UNLIMITED for "unlimited") */
} cli_storage;

/* Usage lines for the options above (ends with a newline). */
#define CLI_STORAGE_USAGE                                                                      \
 "  --storage URL       object store for segments, index files and manifests:\n"               \
 "                      s3://BUCKET[/PREFIX] or file:///abs/dir (the WAL stays local;\n"       \
 "                      collections missing in --data are downloaded from it)\n"               \
 "  --s3-endpoint URL   S3 endpoint (http://127.0.0.1:9000; default: AWS for the region)\n"    \
 "  --s3-region R       S3 region (default us-east-1); credentials: AWS_ACCESS_KEY_ID /\n"     \
 "                      AWS_SECRET_ACCESS_KEY, else ~/.aws/credentials\n"                      \
 "  --cache-mb N        local disk for files also in the store, MiB (0: unlimited)\n"          \
 "  --memory-limit SIZE memory budget of the database: 3G, 512M, 100MiB, bytes, 'unlimited'\n" \
 "                      (default: the cgroup's memory limit less 1/8, else unlimited)\n"

/* Matches one of the storage options at argv[*i]. Returns 1 (taken, *i advanced), 0 (not a
 * storage option) or -1 (bad or missing value; message printed naming cmd). */
int cli_take_storage(int argc, char **argv, int *i, const char *cmd, cli_storage *s);
/* Checks the combination (--s3-* need --storage). Returns 0 or -1 with a message. */
int cli_storage_check(const char *cmd, const cli_storage *s);
/* Copies the options into o. */
void cli_storage_apply(const cli_storage *s, sx_db_options *o);

/* Seconds on CLOCK_MONOTONIC. */
double cli_now(void);

/* Formats a byte count as "12.3 MiB" into buf. Returns buf. */
const char *cli_human_bytes(uint64_t bytes, char *buf, size_t len);
/* Prints the database's memory budget (sx_db_memory_stats) to out: the limit and its source,
 * used and peak, then each kind holding memory, every line prefixed with `indent`. */
void cli_print_memory(FILE *out, const char *indent, sx_db *db);

/* Splits a comma-separated list into at most max_items NUL-terminated items stored in the
 * caller's storage (the string is copied into `store`, store_len bytes). Empty items are an
 * error. Returns the number of items, or -1 with a message. */
int cli_split_list(const char *cmd,
                   const char *what,
                   const char *s,
                   char *store,
                   size_t store_len,
                   const char **items,
                   size_t max_items);

#endif /* SX_TOOLS_CLI_H */
