/*
 * main.c: entry point of the `sextant` command-line tool; dispatches to the subcommands.
 *
 *   sextant import   load vectors from a file into a collection (cli.c)
 *   sextant search   run queries from a file against a collection (cli.c)
 *   sextant info     describe collections and verify checksums (cli.c)
 *   sextant check    offline integrity check, WAL salvage (check.c)
 *   sextant bench    ingest + index build + recall/QPS, optionally beside hnswlib (bench.c)
 *   sextant serve    the Milvus RESTful API v2 server on a data directory (serve.c)
 *   sextant cluster  a local cluster on etcd: up, status, down (cluster.c)
 *   sextant version  print the library version and the SIMD kernels in use
 *
 * Each subcommand parses its own options and prints its own usage on --help. Exit status: 0 ok,
 * 1 failure, 2 usage error (cli.h). The tool uses only the public API in sextant.h.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: sextant <command> [options]\n"
                 "\n"
                 "commands:\n"
                 "  import   load vectors (.fvecs .bvecs .ivecs .npy IDX .gz) into a collection\n"
                 "  index    create or drop the index of an existing collection\n"
                 "  search   search a collection with query vectors from a file\n"
                 "  info     describe a database's collections and verify its checksums\n"
                 "  check    verify every checksum, manifest and index file offline (--salvage)\n"
                 "  bench    measure ingest, index build, recall, QPS and latency\n"
                 "  serve    serve the Milvus RESTful API v2 on a data directory\n"
                 "  cluster  run a local cluster (etcd + fenced shard writers): up, status, down\n"
                 "  version  print the version and SIMD level\n"
                 "\n"
                 "Run 'sextant <command> --help' for the options of a command.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "import") == 0) {
        for (int i = 2; i < argc; i++)
            if (strcmp(argv[i], "--job") == 0)
                return cli_import_job(argc - 1, argv + 1);
        return cli_import(argc - 1, argv + 1);
    }
    if (strcmp(cmd, "index") == 0)
        return cli_index(argc - 1, argv + 1);
    if (strcmp(cmd, "search") == 0)
        return cli_search(argc - 1, argv + 1);
    if (strcmp(cmd, "info") == 0)
        return cli_info(argc - 1, argv + 1);
    if (strcmp(cmd, "check") == 0)
        return cli_check(argc - 1, argv + 1);
    if (strcmp(cmd, "bench") == 0)
        return cli_bench(argc - 1, argv + 1);
    if (strcmp(cmd, "serve") == 0)
        return cli_serve(argc - 1, argv + 1);
    if (strcmp(cmd, "cluster") == 0)
        return cli_cluster(argc - 1, argv + 1);
    if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "sextant version: unexpected argument '%s'\n", argv[2]);
            return CLI_EXIT_USAGE;
        }
        printf("sextant %s (simd: %s)\n", sx_version(), sx_simd_level());
        return CLI_EXIT_OK;
    }
    if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    fprintf(stderr, "sextant: unknown command '%s'\n\n", cmd);
    usage(stderr);
    return CLI_EXIT_USAGE;
}
