/*
 * import_job.c: `sextant import --job`, the bulk import (sx_import_run, docs/internals/IMPORT.md)
 * from the command line:
 *
 *   sextant import --job --data DIR --collection NAME --file F [--file F2,F3 ...]
 *                  [--metric l2|ip|cosine] [--batch-rows N] [--storage URL ...]
 *
 * Each --file is one group: one file (JSON, .npy, .fvecs, .bvecs, .hdf5) or a comma-separated
 * list (one .npy per field). A missing collection is created first when the first group's first
 * file is a .fvecs / .bvecs (its dim): "id" INT64 auto_id + "vector" FLOAT_VECTOR, as the insert
 * path of `sextant import` makes it. Files come from local paths, the --storage store (a
 * relative key) or s3://BUCKET/KEY. Prints rows, segments, seconds, rows/s and MB/s; a status
 * line on a terminal. Exit 0 done, 1 the import failed (nothing of it is visible), 2 usage.
 * Single-threaded: the import runs on the calling thread.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "progress.h"

#define MAX_GROUPS 256

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static bool on_progress(void *ctx, const sx_import_progress *p)
{
    prog *pr = ctx;
    prog_update(pr, p->bytes_done >> 20);
    return true;
}

/* The dim of a TEXMEX file (its first record's), or 0. */
static uint32_t vecs_dim(const char *path)
{
    size_t n = strlen(path);
    if (n < 6 || (strcmp(path + n - 6, ".fvecs") != 0 && strcmp(path + n - 6, ".bvecs") != 0))
        return 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return 0;
    unsigned char b[4];
    size_t got = fread(b, 1, 4, f);
    (void)fclose(f);
    if (got != 4)
        return 0;
    uint32_t d = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    return d <= SX_MAX_DIM ? d : 0;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sextant import --job --data DIR --collection NAME --file F [--file F ...]\n"
            "  --file F           one group of files: a JSON, .npy, .fvecs, .bvecs or .hdf5 file,\n"
            "                     or F1,F2,... (one .npy per field); repeat for more groups\n"
            "  --metric M         l2, ip or cosine, for a collection created from a .fvecs/.bvecs\n"
            "                     file (default l2)\n"
            "  --dim N            the dim of that collection when the first file is not local\n"
            "                     (s3://..., a store key); the job checks it against the file\n"
            "  --batch-rows N     rows per sealed segment (default: the segment "
            "size)\n" CLI_STORAGE_USAGE "\n"
            "Writes sealed segments directly (no WAL), all of them visible at once at the end.\n");
}

int cli_import_job(int argc, char **argv)
{
    const char *cmd = "import --job";
    const char *data = NULL, *name = NULL, *metric_s = NULL, *v = NULL;
    const char *files[MAX_GROUPS];
    size_t n_files = 0;
    uint64_t batch = 0, dim_opt = 0;
    cli_storage sto = { 0 };
    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (cli_flag(argv, &i, "--job"))
            continue;
        if ((r = cli_take_storage(argc, argv, &i, cmd, &sto)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "bad storage option");
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--data", &data)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--collection", &name)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--metric", &metric_s)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "missing value");
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--file", &v)) != 0) {
            if (r < 0 || n_files == MAX_GROUPS)
                return cli_usage_error(cmd, "--file: missing value or more than %d", MAX_GROUPS);
            files[n_files++] = v;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--dim", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--dim", v, 1, SX_MAX_DIM, &dim_opt) != 0)
                return cli_usage_error(cmd, "bad value for --dim");
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--batch-rows", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--batch-rows", v, 1, 1u << 30, &batch) != 0)
                return cli_usage_error(cmd, "bad value for --batch-rows");
            continue;
        }
        return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    if (!data || !name || n_files == 0)
        return cli_usage_error(cmd, "--data, --collection and --file are required");
    if (cli_storage_check(cmd, &sto) != 0)
        return cli_usage_error(cmd, "bad storage option");
    sx_metric metric = SX_METRIC_L2;
    if (metric_s && cli_parse_metric(cmd, metric_s, &metric) != 0)
        return CLI_EXIT_USAGE;

    /* the groups: each --file split at commas (the strings stay in one buffer per group) */
    sx_import_group groups[MAX_GROUPS];
    char *bufs[MAX_GROUPS];
    const char **paths[MAX_GROUPS];
    memset(bufs, 0, sizeof bufs);
    memset(paths, 0, sizeof paths);
    int rc = CLI_EXIT_OK;
    for (size_t g = 0; g < n_files && rc == CLI_EXIT_OK; g++) {
        size_t n = 1;
        for (const char *p = files[g]; *p; p++)
            n += *p == ',';
        bufs[g] = strdup(files[g]);
        paths[g] = calloc(n, sizeof *paths[g]);
        if (!bufs[g] || !paths[g]) {
            rc = cli_fail(cmd, "out of memory");
            break;
        }
        size_t k = 0;
        for (char *t = bufs[g]; t;) {
            char *comma = strchr(t, ',');
            if (comma)
                *comma = '\0';
            if (*t)
                paths[g][k++] = t;
            t = comma ? comma + 1 : NULL;
        }
        if (k == 0)
            rc = cli_usage_error(cmd, "--file '%s' names no file", files[g]);
        groups[g].paths = paths[g];
        groups[g].n_paths = k;
    }
    sx_db *db = NULL;
    sx_collection *c = NULL;
    if (rc == CLI_EXIT_OK) {
        sx_db_options o;
        memset(&o, 0, sizeof o);
        cli_storage_apply(&sto, &o);
        sx_status st = sx_db_open(data, &o, &db);
        if (st != SX_OK)
            rc = cli_sx_fail(cmd, "open", st);
    }
    if (rc == CLI_EXIT_OK && sx_collection_open(db, name, &c) != SX_OK) {
        uint32_t dim = dim_opt ? (uint32_t)dim_opt : vecs_dim(groups[0].paths[0]);
        if (dim == 0) {
            rc = cli_fail(cmd,
                          "collection '%s' does not exist; create it first, or give a local "
                          ".fvecs / .bvecs file first (its dim makes the schema), or --dim",
                          name);
        } else {
            sx_field_def f[2];
            memset(f, 0, sizeof f);
            f[0].name = "id";
            f[0].type = SX_FIELD_INT64;
            f[0].is_primary = true;
            f[0].auto_id = true;
            f[1].name = "vector";
            f[1].type = SX_FIELD_FLOAT_VECTOR;
            f[1].dim = dim;
            sx_collection_def d = { name, f, 2, metric };
            sx_status st = sx_collection_create(db, &d);
            if (st == SX_OK)
                st = sx_collection_open(db, name, &c);
            if (st != SX_OK)
                rc = cli_sx_fail(cmd, "create collection", st);
        }
    }
    if (rc == CLI_EXIT_OK) {
        prog pr;
        prog_begin(&pr, "import", "MiB", 0);
        sx_import_opts io = { .progress = on_progress, .progress_ctx = &pr, .batch_rows = batch };
        sx_import_result res;
        double t0 = now_s();
        sx_status st = sx_import_run(c, groups, n_files, &io, &res);
        double t = now_s() - t0;
        prog_end(&pr);
        if (st != SX_OK) {
            rc = cli_sx_fail(cmd, "import", st);
        } else {
            double mb = (double)res.bytes / 1e6;
            printf("imported %llu rows into %s in %u sealed segment(s) from %.1f MB in %.3f s: "
                   "%.0f rows/s, %.1f MB/s\n",
                   (unsigned long long)res.rows, name, res.segments, mb, t,
                   t > 0 ? (double)res.rows / t : 0.0, t > 0 ? mb / t : 0.0);
        }
    }
    if (c)
        sx_collection_release(c);
    if (db)
        sx_db_close(db);
    for (size_t g = 0; g < n_files; g++) {
        free(bufs[g]);
        free((void *)paths[g]);
    }
    return rc;
}
