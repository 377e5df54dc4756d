/*
 * cli.c: the `sextant import`, `sextant search` and `sextant info` subcommands.
 *
 * import  Loads a vector file (datasets.h) and inserts it into a collection in batches through
 *         sx_insert. A missing collection is created with the schema the tool owns:
 *           id      INT64 primary key (not auto-id) = row number in the file + rows already in
 *                   the collection (after deletes that offset can collide with a live key and
 *                   the insert fails with SX_EEXIST: that is reported, never papered over)
 *           vector  FLOAT_VECTOR of the file's dimension, with --metric (default l2)
 *         An existing collection is accepted when it has exactly an int64 primary key and one
 *         vector field of the right dimension (an auto-id key is then left to the engine).
 *         Then sx_flush, sx_compact when there are several sealed segments (a small memory
 *         budget seals them small; compaction merges them), and with --index: sx_index_create +
 *         sx_index_wait. Prints rows/s.
 *
 *         Nothing is written until everything that can be checked has been (a failed import
 *         must leave nothing a re-run would duplicate):
 *           1. arguments, and the --index type (before the file is read or the database opened);
 *           2. the file (read whole), the existing collection's schema against it;
 *           3. the index type and every --param against the collection's dim and metric
 *              (sx_index_check_params: what sx_index_create would refuse), and an index the
 *              collection already has with other settings (sx_index_create: SX_EEXIST);
 *           4. an existing collection that holds rows is refused unless --append: re-running
 *              an import that failed late (or by mistake) would otherwise add every row again
 *              under new ids, so the same vector comes back twice at distance 0;
 *         only then is a missing collection created and are rows inserted.
 * search  Loads query vectors and runs them as one batched sx_search (the engine spreads a
 *         batch over its search threads); prints each query's hits with the requested fields.
 * info    Opens the database read-only (sx_db_options.read_only: no WAL writes, no builds),
 *         prints each collection's schema, counters and index, then runs sx_db_check. A failed
 *         check prints the engine's message and exits 1.
 *
 * Threading: single-threaded; the engine's background threads are its own business.
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "datasets.h"
#include "search_eval.h"

#define ERR_LEN 1024

static const char *field_type_name(sx_field_type t)
{
    switch (t) {
    case SX_FIELD_INT64:
        return "INT64";
    case SX_FIELD_DOUBLE:
        return "DOUBLE";
    case SX_FIELD_BOOL:
        return "BOOL";
    case SX_FIELD_VARCHAR:
        return "VARCHAR";
    case SX_FIELD_FLOAT_VECTOR:
        return "FLOAT_VECTOR";
    case SX_FIELD_FLOAT16_VECTOR:
        return "FLOAT16_VECTOR";
    case SX_FIELD_BFLOAT16_VECTOR:
        return "BFLOAT16_VECTOR";
    case SX_FIELD_BINARY_VECTOR:
        return "BINARY_VECTOR";
    }
    return "?";
}

static const char *index_state_name(sx_index_state s)
{
    switch (s) {
    case SX_INDEX_NONE:
        return "none";
    case SX_INDEX_IN_PROGRESS:
        return "in progress";
    case SX_INDEX_FINISHED:
        return "finished";
    case SX_INDEX_FAILED:
        return "FAILED";
    }
    return "?";
}

/* Upper-cases an index type name ("hnsw" -> "HNSW") into out. Returns 0, or -1 if too long. */
static int index_type_upper(const char *in, char *out, size_t len)
{
    size_t n = strlen(in);
    if (n == 0 || n + 1 > len)
        return -1;
    for (size_t j = 0; j <= n; j++)
        out[j] = (char)toupper((unsigned char)in[j]);
    return 0;
}

static bool is_dir(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

/* ------------------------------------------------------------------ import */

static void import_usage(FILE *out)
{
    fprintf(out,
            "usage: sextant import --data DIR --collection NAME --file FILE [options]\n"
            "\n"
            "  --data DIR          database directory (created if missing)\n"
            "  --collection NAME   collection (created if missing: int64 key `id` = row number,\n"
            "                      offset by the rows already present; vector field `vector`)\n"
            "  --file FILE         .fvecs .bvecs .ivecs .npy or IDX .gz\n"
            "  --metric M          l2 | ip | cosine for a new collection (default l2)\n"
            "  --index T           create this index after the load and wait, one of flat |\n"
            "                      hnsw (autoindex) | hnsw_sq | ivf_flat | ivf_sq8 | ivf_pq |\n"
            "                      diskann | gpu_cagra | gpu_ivf_flat | gpu_ivf_pq |\n"
            "                      gpu_brute_force (checked with its --param before any row is\n"
            "                      written)\n"
            "  --param K=V         index build parameter, repeatable (M=16, efConstruction=200)\n"
            "  --append            add the rows to a collection that already holds rows (ids\n"
            "                      continue after them); without it such an import is refused\n"
            "  --batch N           rows per sx_insert call (default 1000)\n"
            "  --limit N           import only the first N rows of the file\n"
            "  --segment-max SIZE  seal and merge segments at SIZE of vectors (segment_max_bytes\n"
            "                      and merge_max_bytes). Default: seal at 256M and merge up to\n"
            "                      256M, or up to 2G with --index diskann (Milvus's\n"
            "                      diskSegmentMaxSize); a small --memory-limit seals smaller\n"
            "                      segments, merged after the load "
            "(sx_compact)\n" CLI_STORAGE_USAGE);
}

typedef struct import_target {
    const char *pk_name; /* borrowed from the collection info */
    bool pk_auto;
    const char *vec_name;
    uint32_t dim;
} import_target;

/* Checks that an existing collection can take this file. Returns 0 or CLI_EXIT_FAIL. */
static int import_check_schema(const char *cmd,
                               const sx_collection_info *ci,
                               size_t dim,
                               bool metric_given,
                               sx_metric metric,
                               import_target *t)
{
    memset(t, 0, sizeof *t);
    for (size_t j = 0; j < ci->n_fields; j++) {
        const sx_field_def *fd = &ci->fields[j];
        if (fd->is_primary) {
            if (fd->type != SX_FIELD_INT64)
                return cli_fail(cmd,
                                "collection '%s' has a %s primary key '%s'; import fills int64 "
                                "keys only",
                                ci->name, field_type_name(fd->type), fd->name);
            t->pk_name = fd->name;
            t->pk_auto = fd->auto_id;
        } else if (fd->type == SX_FIELD_FLOAT_VECTOR) {
            t->vec_name = fd->name;
            t->dim = fd->dim;
        } else {
            return cli_fail(cmd,
                            "collection '%s' has scalar field '%s' (%s); import only fills the "
                            "primary key and the vector",
                            ci->name, fd->name, field_type_name(fd->type));
        }
    }
    if (t->pk_name == NULL || t->vec_name == NULL)
        return cli_fail(cmd, "collection '%s' lacks a primary key or a vector field", ci->name);
    if ((size_t)t->dim != dim)
        return cli_fail(cmd, "the file has dimension %zu but collection '%s' field '%s' has %u",
                        dim, ci->name, t->vec_name, t->dim);
    if (metric_given && metric != ci->metric)
        return cli_fail(cmd, "--metric %s differs from collection '%s' metric %s",
                        cli_metric_name(metric), ci->name, cli_metric_name(ci->metric));
    return 0;
}

/* Opens the collection `name` when it exists and checks that it can take rows of `dim`. Returns 0
 * with *out (NULL when there is no such collection: nothing is created here), or CLI_EXIT_FAIL. */
static int import_find(const char *cmd,
                       sx_db *db,
                       const char *name,
                       size_t dim,
                       bool metric_given,
                       sx_metric metric,
                       sx_collection **out,
                       sx_collection_info *ci,
                       import_target *t)
{
    sx_collection *c = NULL;
    *out = NULL;
    sx_status st = sx_collection_open(db, name, &c);
    if (st == SX_ENOTFOUND)
        return 0;
    if (st != SX_OK)
        return cli_sx_fail(cmd, name, st);
    st = sx_collection_describe(c, ci);
    if (st != SX_OK) {
        int rc = cli_sx_fail(cmd, "describe", st);
        sx_collection_release(c);
        return rc;
    }
    if (import_check_schema(cmd, ci, dim, metric_given, metric, t) != 0) {
        sx_collection_release(c);
        return CLI_EXIT_FAIL;
    }
    *out = c;
    return 0;
}

/* Creates the collection with the tool's schema and opens it. Returns 0 with *out, or
 * CLI_EXIT_FAIL. */
static int import_create(const char *cmd,
                         sx_db *db,
                         const char *name,
                         size_t dim,
                         sx_metric metric,
                         sx_collection **out,
                         sx_collection_info *ci,
                         import_target *t)
{
    sx_field_def fields[2];
    memset(fields, 0, sizeof fields);
    fields[0].name = "id";
    fields[0].type = SX_FIELD_INT64;
    fields[0].is_primary = true;
    fields[1].name = "vector";
    fields[1].type = SX_FIELD_FLOAT_VECTOR;
    fields[1].dim = (uint32_t)dim;
    sx_collection_def def = { .name = name, .fields = fields, .n_fields = 2, .metric = metric };
    sx_status st = sx_collection_create(db, &def);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "create collection", st);
    printf("created collection '%s' (dim %zu, metric %s)\n", name, dim, cli_metric_name(metric));
    int rc = import_find(cmd, db, name, dim, false, metric, out, ci, t);
    if (rc == 0 && *out == NULL)
        rc = cli_fail(cmd, "collection '%s' vanished after its creation", name);
    return rc;
}

/* The key=value list sx_index_create keeps (and sx_index_describe shows) for these params: in
 * the given order, without the keys it ignores. Returns 0, or -1 if it does not fit. */
static int index_params_str(const cli_params *ps, char *out, size_t len)
{
    size_t off = 0, kept = 0;
    out[0] = '\0';
    for (size_t i = 0; i < ps->n; i++) {
        const char *k = ps->p[i].key;
        if (strcasecmp(k, "index_type") == 0 || strcasecmp(k, "metric_type") == 0 ||
            strcasecmp(k, "metricType") == 0)
            continue;
        int w = snprintf(out + off, len - off, "%s%s=%s", kept ? "," : "", k, ps->p[i].value);
        if (w < 0 || (size_t)w >= len - off)
            return -1;
        off += (size_t)w;
        kept++;
    }
    return 0;
}

/* Step 3 of the file comment: the index is checked against the collection's dim and metric (those
 * of the collection about to be created when c is NULL), and against an index c already has.
 * Returns 0, or CLI_EXIT_USAGE (a bad type or parameter: the engine's message names it and its
 * range) or CLI_EXIT_FAIL (another index exists), with nothing written. */
static int import_check_index(const char *cmd,
                              sx_collection *c,
                              const char *name,
                              const char *itype,
                              const cli_params *params,
                              size_t dim,
                              sx_metric metric)
{
    sx_status st = sx_index_check_params(itype, params->p, params->n, (uint32_t)dim, metric);
    if (st != SX_OK)
        return cli_usage_error(cmd,
                               "--index %s: %s: %s (collection '%s': dim %zu, metric %s); "
                               "nothing was written",
                               itype, sx_status_str(st), sx_errmsg(), name, dim,
                               cli_metric_name(metric));
    if (c == NULL)
        return 0;
    sx_index_info ii;
    st = sx_index_describe(c, &ii);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "describe index", st);
    if (ii.type[0] == '\0')
        return 0;
    const char *want = strcasecmp(itype, "AUTOINDEX") == 0 ? "HNSW" : itype;
    char pstr[sizeof ii.params];
    if (index_params_str(params, pstr, sizeof pstr) != 0)
        return cli_usage_error(cmd, "--param: the index parameters are too long");
    if (strcasecmp(ii.type, want) == 0 && strcmp(pstr, ii.params) == 0)
        return 0; /* the same index: sx_index_create is then a no-op */
    return cli_fail(cmd,
                    "collection '%s' already has a %s index (%s), not --index %s (%s); nothing "
                    "was written: %s",
                    name, ii.type, ii.params[0] ? ii.params : "defaults", itype,
                    pstr[0] ? pstr : "defaults",
                    strcmp(cmd, "index") == 0
                        ? "drop it first (sextant index ... --drop), then create the new one"
                        : "leave out --index to keep it, or give the same settings");
}

/* Step 4 of the file comment. Returns 0 or CLI_EXIT_FAIL. */
static int import_check_append(
    const char *cmd, const sx_collection_info *ci, const char *file, size_t file_rows, bool append)
{
    if (ci->n_rows == 0 || append)
        return 0;
    return cli_fail(cmd,
                    "collection '%s' already holds %" PRIu64 " rows, so importing %s would add its "
                    "%zu rows beside them (under new ids: any row already imported would then be "
                    "there twice); nothing was written. Pass --append to add them, or import into "
                    "another --collection",
                    ci->name, ci->n_rows, file, file_rows);
}

/* A memory budget seals growing segments small: sx_compact merges runs of them into segments of
 * up to segment_max_bytes (streaming, from the mapped files) before the index is built, so the
 * collection is indexed and searched as a few large segments. */
static int merge_segments(const char *cmd, sx_collection *c)
{
    sx_collection_info ci;
    sx_status st = sx_collection_describe(c, &ci);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "describe", st);
    if (ci.n_segments < 2)
        return 0;
    double t0 = cli_now();
    uint32_t before = ci.n_segments;
    st = sx_compact(c);
    if (st == SX_OK)
        st = sx_collection_describe(c, &ci);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "merging segments (sx_compact)", st);
    if (ci.n_segments < before)
        printf("merged %u sealed segments into %u in %.3f s\n", before, ci.n_segments,
               cli_now() - t0);
    return 0;
}

/* Inserts every row of m in batches (a streamed file is read batch by batch, so an import of a
 * file larger than memory holds one batch); keys continue after `first_id`. */
static int import_rows(const char *cmd,
                       sx_collection *c,
                       const import_target *t,
                       ds_matrix *m,
                       size_t batch,
                       uint64_t first_id)
{
    size_t bs = batch < m->n ? batch : m->n;
    int64_t *ids = malloc((bs ? bs : 1) * sizeof *ids);
    float *vbuf = m->streamed ? malloc((bs ? bs : 1) * m->dim * sizeof *vbuf) : NULL;
    if (ids == NULL || (m->streamed && vbuf == NULL)) {
        free(ids);
        free(vbuf);
        return cli_fail(cmd, "out of memory");
    }
    double t_report = cli_now();
    int rc = 0;
    for (size_t r = 0; r < m->n; r += bs) {
        size_t rows = m->n - r < bs ? m->n - r : bs;
        char err[512];
        const float *v = ds_rows(m, r, rows, vbuf, err, sizeof err);
        if (v == NULL) {
            rc = cli_fail(cmd, "%s", err);
            break;
        }
        sx_column cols[2];
        size_t nc = 0;
        if (!t->pk_auto) {
            for (size_t j = 0; j < rows; j++)
                ids[j] = (int64_t)(first_id + r + j);
            cols[nc++] = (sx_column){ .name = t->pk_name, .type = SX_FIELD_INT64, .data = ids };
        }
        cols[nc++] = (sx_column){ .name = t->vec_name, .type = SX_FIELD_FLOAT_VECTOR, .data = v };
        sx_batch b = { .n_rows = rows, .cols = cols, .n_cols = nc };
        sx_status st = sx_insert(c, &b, NULL);
        if (st != SX_OK) {
            char what[96];
            snprintf(what, sizeof what, "insert of rows %zu..%zu", r, r + rows - 1);
            rc = cli_sx_fail(cmd, what, st);
            break;
        }
        double now = cli_now();
        if (now - t_report >= 5.0) {
            fprintf(stderr, "sextant import: %zu / %zu rows\n", r + rows, m->n);
            t_report = now;
        }
    }
    free(ids);
    free(vbuf);
    return rc;
}

static int
import_index(const char *cmd, sx_collection *c, const char *itype, const cli_params *params)
{
    double t0 = cli_now();
    sx_status st = sx_index_create(c, itype, params->p, params->n);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "create index", st);
    st = sx_index_wait(c, 0);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "index build", st);
    sx_index_info ii;
    st = sx_index_describe(c, &ii);
    if (st != SX_OK)
        return cli_sx_fail(cmd, "describe index", st);
    printf("index %s (%s) built in %.3f s: %s, %" PRIu64 " / %" PRIu64 " rows indexed\n", ii.type,
           ii.params[0] ? ii.params : "defaults", cli_now() - t0, index_state_name(ii.state),
           ii.indexed_rows, ii.total_rows);
    return 0;
}

int cli_import(int argc, char **argv)
{
    const char *cmd = "import";
    const char *data = NULL, *name = NULL, *file = NULL, *index = NULL, *v = NULL;
    sx_metric metric = SX_METRIC_L2;
    bool metric_given = false, append = false;
    uint64_t batch = 1000, limit = 0, seg_max = 0;
    cli_params params = { 0 };
    ds_matrix m = { 0 };
    sx_db *db = NULL;
    sx_collection *c = NULL;
    int rc = CLI_EXIT_FAIL;
    char err[ERR_LEN];
    char itype[32] = "";
    cli_storage sto = { 0 };
    sx_status st;

    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            import_usage(stdout);
            rc = CLI_EXIT_OK;
            goto out;
        }
        if (cli_flag(argv, &i, "--append")) {
            append = true;
            continue;
        }
        if ((r = cli_take_storage(argc, argv, &i, cmd, &sto)) != 0) {
            if (r < 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--data", &data)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--collection", &name)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--file", &file)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--index", &index)) != 0) {
            if (r < 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--metric", &v)) != 0) {
            if (r < 0 || cli_parse_metric(cmd, v, &metric) != 0)
                goto usage;
            metric_given = true;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--param", &v)) != 0) {
            if (r < 0 || cli_params_add(&params, cmd, v) != 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--batch", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--batch", v, 1, 10000000, &batch) != 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--limit", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--limit", v, 1, UINT64_MAX, &limit) != 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--segment-max", &v)) != 0) {
            if (r < 0 || cli_parse_size(cmd, "--segment-max", v, 1u << 20, &seg_max) != 0)
                goto usage;
            continue;
        }
        rc = cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
        goto out;
    }
    if (data == NULL || name == NULL || file == NULL) {
        rc = cli_usage_error(cmd, "--data, --collection and --file are required");
        goto out;
    }
    if (index != NULL && index_type_upper(index, itype, sizeof itype) != 0) {
        rc = cli_usage_error(cmd, "--index: bad index type '%s'", index);
        goto out;
    }
    if (index == NULL && params.n > 0) {
        rc = cli_usage_error(cmd, "--param needs --index");
        goto out;
    }
    if (cli_storage_check(cmd, &sto) != 0)
        goto usage;
    /* Step 1: the type alone (its parameters need the dim), before reading the file. */
    if (index != NULL) {
        st = sx_index_check_search_params(itype, NULL, 0, 1);
        if (st != SX_OK) {
            rc = cli_usage_error(cmd, "--index %s: %s: %s", index, sx_status_str(st), sx_errmsg());
            goto out;
        }
    }

    double t0 = cli_now();
    if (ds_open_float(file, (size_t)limit, &m, err, sizeof err) != 0) {
        rc = cli_fail(cmd, "%s", err);
        goto out;
    }
    fprintf(stderr, "sextant import: %s %zu x %zu vectors from %s in %.2f s\n",
            m.streamed ? "opened" : "read", m.n, m.dim, file, cli_now() - t0);
    if (m.dim > SX_MAX_DIM) {
        rc = cli_fail(cmd, "%s: dimension %zu exceeds SX_MAX_DIM (%u)", file, m.dim, SX_MAX_DIM);
        goto out;
    }
    sx_db_options iopts = { 0 };
    cli_storage_apply(&sto, &iopts);
    /* Milvus merges DISKANN collections' segments up to dataCoord.segment.diskSegmentMaxSize
     * (2 GB): a disk graph per 256 MiB would multiply a query's I/Os by the segment count. The
     * growing segment (in RAM) still seals at 256 MiB: only the merge target is larger. */
    iopts.segment_max_bytes = seg_max;
    iopts.merge_max_bytes = seg_max ? seg_max : strcmp(itype, "DISKANN") == 0 ? 2ull << 30 : 0;
    st = sx_db_open(data, &iopts, &db);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, data, st);
        goto out;
    }
    sx_collection_info ci;
    import_target t = { 0 };
    if (import_find(cmd, db, name, m.dim, metric_given, metric, &c, &ci, &t) != 0)
        goto out;
    if (index != NULL) {
        rc = import_check_index(cmd, c, name, itype, &params, m.dim, c ? ci.metric : metric);
        if (rc != 0)
            goto out;
        rc = CLI_EXIT_FAIL;
    }
    if (c != NULL && import_check_append(cmd, &ci, file, m.n, append) != 0)
        goto out;
    if (c == NULL && import_create(cmd, db, name, m.dim, metric, &c, &ci, &t) != 0)
        goto out;
    uint64_t existing = 0;
    if (!t.pk_auto) {
        st = sx_count(c, NULL, &existing);
        if (st != SX_OK) {
            rc = cli_sx_fail(cmd, "count", st);
            goto out;
        }
    }
    double t_ins = cli_now();
    if (import_rows(cmd, c, &t, &m, (size_t)batch, existing) != 0)
        goto out;
    double insert_s = cli_now() - t_ins;
    st = sx_flush(c);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "flush", st);
        goto out;
    }
    double load_s = cli_now() - t_ins;
    printf("imported %zu rows into '%s' in %.3f s (%.0f rows/s; insert %.3f s, flush %.3f s)\n",
           m.n, name, load_s, load_s > 0 ? (double)m.n / load_s : 0.0, insert_s, load_s - insert_s);
    if (merge_segments(cmd, c) != 0)
        goto out;
    if (index != NULL && import_index(cmd, c, itype, &params) != 0)
        goto out;
    if (sto.url) {
        /* the index files built after the flush */
        double t_sync = cli_now();
        st = sx_db_sync(db);
        if (st != SX_OK) {
            rc = cli_sx_fail(cmd, "sync to the object store", st);
            goto out;
        }
        printf("synced to %s in %.3f s\n", sto.url, cli_now() - t_sync);
    }
    cli_print_memory(stdout, "", db);
    rc = CLI_EXIT_OK;
    goto out;
usage:
    rc = cli_usage_error(cmd, "bad arguments");
out:
    sx_collection_release(c);
    sx_db_close(db);
    ds_free(&m);
    cli_params_fini(&params);
    return rc;
}

/* ------------------------------------------------------------------ search */

static void search_usage(FILE *out)
{
    fprintf(out,
            "usage: sextant search --data DIR --collection NAME --query FILE [options]\n"
            "\n"
            "  --query FILE      query vectors (.fvecs .bvecs .npy IDX .gz)\n"
            "  --k N             hits per query (default 10)\n"
            "  --nq N            use only the first N queries\n"
            "  --filter EXPR     boolean filter expression, e.g. \"id < 100\"\n"
            "  --param K=V       search parameter, repeatable (ef=64)\n"
            "  --output F1,F2    fields to print with each hit (\"*\" = all)\n"
            "\n"
            "Measuring instead of printing hits (query vectors sent one per call):\n"
            "  --gt FILE         ground-truth ids (.ivecs, row numbers = the `id` key that\n"
            "                    `sextant import` assigns): print recall@k, QPS, p50/p99 and\n"
            "                    I/Os per query (DISKANN) instead of the hits\n"
            "  --gt-dist FILE    their distances (.fvecs; Euclidean for l2, similarity for\n"
            "                    ip/cosine): distance-threshold recall, as `sextant bench`\n"
            "  --gt-id-offset N  ground-truth row r is key r + N (1 for the auto_id keys of\n"
            "                    `sextant import --job`; default 0)\n"
            "  --sweep K=V1,V2   one run per value of search parameter K (search_list=50,100)\n"
            "  --threads N       searching threads (default 1)\n" CLI_STORAGE_USAGE);
}

/* Peak resident memory of this process (VmHWM), bytes, or 0 when /proc has no answer. */
static uint64_t peak_rss(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    uint64_t kb = 0;
    if (f == NULL)
        return 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmHWM:", 6) == 0) {
            kb = strtoull(line + 6, NULL, 10);
            break;
        }
    }
    (void)fclose(f);
    return kb * 1024;
}

static void print_value(const sx_column *col, uint32_t dim, size_t row)
{
    switch (col->type) {
    case SX_FIELD_INT64:
        printf("%" PRId64, ((const int64_t *)col->data)[row]);
        break;
    case SX_FIELD_DOUBLE:
        printf("%.17g", ((const double *)col->data)[row]);
        break;
    case SX_FIELD_BOOL:
        printf("%s", ((const bool *)col->data)[row] ? "true" : "false");
        break;
    case SX_FIELD_VARCHAR: {
        const char *s = ((char *const *)col->data)[row];
        printf("\"%s\"", s != NULL ? s : "");
        break;
    }
    case SX_FIELD_FLOAT_VECTOR: {
        const float *vec = (const float *)col->data + row * (size_t)dim;
        uint32_t show = dim < 4 ? dim : 4;
        putchar('[');
        for (uint32_t j = 0; j < show; j++)
            printf("%s%g", j ? ", " : "", (double)vec[j]);
        if (show < dim)
            printf(", ... (%u)", dim);
        putchar(']');
        break;
    }
    case SX_FIELD_FLOAT16_VECTOR:
    case SX_FIELD_BFLOAT16_VECTOR:
    case SX_FIELD_BINARY_VECTOR: {
        /* the stored bytes, in hex (the first 8) */
        size_t nb = sx_vector_row_bytes(col->type, dim);
        const uint8_t *b = (const uint8_t *)col->data + row * nb;
        size_t show = nb < 8 ? nb : 8;
        printf("0x");
        for (size_t j = 0; j < show; j++)
            printf("%02x", b[j]);
        if (show < nb)
            printf("... (%zu bytes)", nb);
        break;
    }
    }
}

int cli_search(int argc, char **argv)
{
    const char *cmd = "search";
    const char *data = NULL, *name = NULL, *qfile = NULL, *filter = NULL, *output = NULL;
    const char *v = NULL;
    cli_storage sto = { 0 };
    uint64_t k = 10, nq = 0;
    cli_params params = { 0 };
    ds_matrix q = { 0 };
    sx_db *db = NULL;
    sx_collection *c = NULL;
    sx_rowset *rs = NULL;
    search_eval_opts ev = { .threads = 1 };
    int rc = CLI_EXIT_FAIL;
    char err[ERR_LEN];
    char out_store[4096];
    const char *out_fields[SX_MAX_FIELDS];
    size_t n_out = 0;
    sx_status st;

    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            search_usage(stdout);
            rc = CLI_EXIT_OK;
            goto out;
        }
        if ((r = cli_take_storage(argc, argv, &i, cmd, &sto)) != 0) {
            if (r < 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--data", &data)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--collection", &name)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--query", &qfile)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--filter", &filter)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--output", &output)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--gt", &ev.gt)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--gt-dist", &ev.gt_dist)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--sweep", &ev.sweep)) != 0) {
            if (r < 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--k", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--k", v, 1, SX_MAX_TOPK, &k) != 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--gt-id-offset", &v)) != 0) {
            uint64_t off;
            if (r < 0 || cli_parse_u64(cmd, "--gt-id-offset", v, 0, INT32_MAX, &off) != 0)
                goto usage;
            ev.id_offset = (int64_t)off;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--threads", &v)) != 0) {
            uint64_t t;
            if (r < 0 || cli_parse_u64(cmd, "--threads", v, 1, 256, &t) != 0)
                goto usage;
            ev.threads = (unsigned)t;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--nq", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--nq", v, 1, UINT64_MAX, &nq) != 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--param", &v)) != 0) {
            if (r < 0 || cli_params_add(&params, cmd, v) != 0)
                goto usage;
            continue;
        }
        rc = cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
        goto out;
    }
    if (data == NULL || name == NULL || qfile == NULL) {
        rc = cli_usage_error(cmd, "--data, --collection and --query are required");
        goto out;
    }
    if (ev.gt == NULL && (ev.gt_dist != NULL || ev.sweep != NULL || ev.threads != 1)) {
        rc = cli_usage_error(cmd, "--gt-dist, --sweep and --threads measure: they need --gt");
        goto out;
    }
    if (ev.gt != NULL && (filter != NULL || output != NULL)) {
        rc = cli_usage_error(cmd, "--gt measures unfiltered searches: drop --filter / --output");
        goto out;
    }
    if (output != NULL) {
        int n = cli_split_list(cmd, "--output", output, out_store, sizeof out_store, out_fields,
                               SX_MAX_FIELDS);
        if (n < 0)
            goto usage;
        n_out = (size_t)n;
    }
    if (cli_storage_check(cmd, &sto) != 0)
        goto usage;
    if (!sto.url && !is_dir(data)) { /* with a store, a fresh directory is filled from it */
        rc = cli_fail(cmd, "no database directory at %s", data);
        goto out;
    }
    if (ds_load_float(qfile, (size_t)nq, &q, err, sizeof err) != 0) {
        rc = cli_fail(cmd, "%s", err);
        goto out;
    }
    sx_db_options opts = { 0 };
    opts.read_only = true;
    cli_storage_apply(&sto, &opts);
    double t_open = cli_now();
    st = sx_db_open(data, &opts, &db);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, data, st);
        goto out;
    }
    st = sx_collection_open(db, name, &c);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, name, st);
        goto out;
    }
    sx_collection_info ci;
    st = sx_collection_describe(c, &ci);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "describe", st);
        goto out;
    }
    for (size_t j = 0; j < ci.n_fields; j++) {
        if (sx_field_is_vector(ci.fields[j].type) && ci.fields[j].type != SX_FIELD_FLOAT_VECTOR) {
            rc = cli_fail(cmd,
                          "collection '%s' field '%s' is a %s field; the command line searches "
                          "float32 vectors only (use the server's REST or gRPC API)",
                          name, ci.fields[j].name, field_type_name(ci.fields[j].type));
            goto out;
        }
        if (ci.fields[j].type == SX_FIELD_FLOAT_VECTOR && (size_t)ci.fields[j].dim != q.dim) {
            rc = cli_fail(cmd, "%s has dimension %zu but collection '%s' field '%s' has %u", qfile,
                          q.dim, name, ci.fields[j].name, ci.fields[j].dim);
            goto out;
        }
    }
    if (ev.gt != NULL) {
        fprintf(stderr, "sextant search: opened '%s' (%" PRIu64 " rows) in %.2f s\n", name,
                ci.n_rows, cli_now() - t_open);
        ev.k = (uint32_t)k;
        rc = search_eval(&ev, c, &q, params.p, params.n);
        cli_print_memory(stderr, "sextant search: ", db);
        fprintf(stderr, "sextant search: peak RSS of the process %.1f MiB (VmHWM)\n",
                (double)peak_rss() / 1048576.0);
        goto out;
    }
    sx_search_req req = {
        .queries = q.f,
        .nq = q.n,
        .k = (uint32_t)k,
        .filter = filter,
        .output_fields = n_out > 0 ? out_fields : NULL,
        .n_output_fields = n_out,
        .params = params.p,
        .n_params = params.n,
        .metric = -1,
    };
    double t0 = cli_now();
    st = sx_search(c, &req, &rs);
    double dt = cli_now() - t0;
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "search", st);
        goto out;
    }
    size_t row = 0;
    for (size_t qi = 0; qi < rs->nq; qi++) {
        printf("query %zu: %zu hit%s\n", qi, rs->topks[qi], rs->topks[qi] == 1 ? "" : "s");
        for (size_t h = 0; h < rs->topks[qi]; h++, row++) {
            printf("  %3zu. ", h + 1);
            for (size_t col = 0; col < rs->n_cols; col++) {
                printf("%s%s=", col ? "  " : "", rs->cols[col].name);
                print_value(&rs->cols[col], rs->dims[col], row);
                if (col == 0)
                    printf("  distance=%.6g", (double)rs->distances[row]);
            }
            putchar('\n');
        }
    }
    fprintf(stderr, "sextant search: %zu queries, k=%" PRIu64 ", %.3f ms (%.0f QPS batched)\n", q.n,
            k, dt * 1e3, dt > 0 ? (double)q.n / dt : 0.0);
    cli_print_memory(stderr, "sextant search: ", db);
    rc = CLI_EXIT_OK;
    goto out;
usage:
    rc = cli_usage_error(cmd, "bad arguments");
out:
    sx_rowset_free(rs);
    sx_collection_release(c);
    sx_db_close(db);
    ds_free(&q);
    cli_params_fini(&params);
    return rc;
}

/* ------------------------------------------------------------------ info */

static void info_usage(FILE *out)
{
    fprintf(out, "usage: sextant info --data DIR [--collection NAME]\n"
                 "\n"
                 "Prints each collection's schema, rows, segments, WAL size, memory and index,\n"
                 "then verifies every checksum (sx_db_check). Opens the database read-only.\n"
                 "\n" CLI_STORAGE_USAGE);
}

/* Prints one collection. Returns 0 or CLI_EXIT_FAIL. */
static int info_collection(const char *cmd, sx_db *db, const char *name)
{
    sx_collection *c = NULL;
    char hb[32];
    sx_status st = sx_collection_open(db, name, &c);
    if (st != SX_OK)
        return cli_sx_fail(cmd, name, st);
    sx_collection_info ci;
    st = sx_collection_describe(c, &ci);
    if (st != SX_OK) {
        int rc = cli_sx_fail(cmd, name, st);
        sx_collection_release(c);
        return rc;
    }
    printf("collection %s\n", ci.name);
    printf("  metric:        %s\n", cli_metric_name(ci.metric));
    printf("  fields:\n");
    for (size_t j = 0; j < ci.n_fields; j++) {
        const sx_field_def *fd = &ci.fields[j];
        printf("    %-20s %-12s", fd->name, field_type_name(fd->type));
        if (sx_field_is_vector(fd->type))
            printf(" dim=%u", fd->dim);
        if (fd->type == SX_FIELD_VARCHAR)
            printf(" max_length=%u", fd->max_length);
        if (fd->is_primary)
            printf(" primary%s", fd->auto_id ? " auto_id" : "");
        if (fd->nullable)
            printf(" nullable");
        putchar('\n');
    }
    printf("  rows:          %" PRIu64 "\n", ci.n_rows);
    printf("  segments:      %u sealed\n", ci.n_segments);
    printf("  growing rows:  %" PRIu64 "\n", ci.growing_rows);
    printf("  WAL bytes:     %" PRIu64 "\n", ci.wal_bytes);
    printf("  memory:        %s (%" PRIu64 " bytes)\n",
           cli_human_bytes(ci.memory_bytes, hb, sizeof hb), ci.memory_bytes);
    size_t n_vec = 0;
    for (size_t j = 0; j < ci.n_fields; j++)
        n_vec += sx_field_is_vector(ci.fields[j].type);
    /* one index per vector field: "index:" alone with one vector field, else one per field */
    for (size_t j = 0; j < ci.n_fields; j++) {
        const sx_field_def *fd = &ci.fields[j];
        if (!sx_field_is_vector(fd->type))
            continue;
        char label[300];
        if (n_vec > 1)
            (void)snprintf(label, sizeof label, "index on %s:", fd->name);
        else
            (void)snprintf(label, sizeof label, "index:");
        sx_index_info ii;
        st = sx_index_describe_on(c, fd->name, &ii);
        if (st == SX_ENOTFOUND || (st == SX_OK && ii.state == SX_INDEX_NONE)) {
            if (n_vec > 1)
                printf("  %-14s none (metric %s)\n", label, cli_metric_name(ii.metric));
            else
                printf("  %-14s none\n", label);
            continue;
        }
        if (st != SX_OK) {
            int rc = cli_sx_fail(cmd, "describe index", st);
            sx_collection_release(c);
            return rc;
        }
        printf("  %-14s %s (%s), metric %s\n", label, ii.type, index_state_name(ii.state),
               cli_metric_name(ii.metric));
        printf("    rows:        %" PRIu64 " indexed / %" PRIu64 " total (%" PRIu64 " pending)\n",
               ii.indexed_rows, ii.total_rows, ii.pending_rows);
        printf("    params:      %s\n", ii.params[0] ? ii.params : "(defaults)");
        printf("    memory:      %s (%" PRIu64 " bytes)\n",
               cli_human_bytes(ii.memory_bytes, hb, sizeof hb), ii.memory_bytes);
        if (ii.state == SX_INDEX_FAILED || ii.fail_reason[0] != '\0')
            printf("    failure:     %s\n", ii.fail_reason[0] ? ii.fail_reason : "(no reason)");
    }
    sx_collection_release(c);
    return 0;
}

int cli_info(int argc, char **argv)
{
    const char *cmd = "info";
    const char *data = NULL, *name = NULL;
    cli_storage sto = { 0 };
    sx_db *db = NULL;
    char **names = NULL;
    size_t n_names = 0;
    int rc = CLI_EXIT_FAIL;
    sx_status st;

    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            info_usage(stdout);
            return CLI_EXIT_OK;
        }
        if ((r = cli_take_storage(argc, argv, &i, cmd, &sto)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "bad arguments");
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--data", &data)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--collection", &name)) != 0) {
            if (r < 0)
                return cli_usage_error(cmd, "bad arguments");
            continue;
        }
        return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    if (data == NULL)
        return cli_usage_error(cmd, "--data is required");
    if (cli_storage_check(cmd, &sto) != 0)
        return cli_usage_error(cmd, "bad arguments");
    if (!sto.url && !is_dir(data))
        return cli_fail(cmd, "no database directory at %s", data);

    sx_db_options opts = { 0 };
    opts.read_only = true;
    cli_storage_apply(&sto, &opts);
    st = sx_db_open(data, &opts, &db);
    if (st != SX_OK)
        return cli_sx_fail(cmd, data, st);
    printf("database %s (sextant %s, simd %s)\n", data, sx_version(), sx_simd_level());
    int bad = 0;
    if (name != NULL) {
        bad |= info_collection(cmd, db, name);
    } else {
        st = sx_collection_list(db, &names, &n_names);
        if (st != SX_OK) {
            rc = cli_sx_fail(cmd, "list collections", st);
            goto out;
        }
        if (n_names == 0)
            printf("no collections\n");
        for (size_t j = 0; j < n_names; j++)
            bad |= info_collection(cmd, db, names[j]);
    }
    cli_print_memory(stdout, "", db);
    st = sx_db_check(db);
    if (st != SX_OK) {
        const char *msg = sx_errmsg();
        printf("checksums: FAILED: %s: %s\n", sx_status_str(st), msg);
        fprintf(stderr, "sextant info: check failed: %s: %s\n", sx_status_str(st), msg);
        rc = CLI_EXIT_FAIL;
        goto out;
    }
    printf("checksums: ok\n");
    rc = bad ? CLI_EXIT_FAIL : CLI_EXIT_OK;
out:
    sx_strings_free(names, n_names);
    sx_db_close(db);
    return rc;
}

/* ---------------------------------------------------------------- index */

static void index_usage(FILE *out)
{
    fprintf(
        out,
        "usage: sextant index --data DIR --collection NAME (--index T [--param K=V ...] |\n"
        "                     --drop) [--no-wait]\n"
        "\n"
        "Creates (or drops) the index of an existing collection, e.g. after an import whose\n"
        "index build failed, or to change the index type: drop, then create.\n"
        "\n"
        "  --data DIR          database directory (must exist)\n"
        "  --collection NAME   an existing collection\n"
        "  --index T           one of flat | hnsw (autoindex) | hnsw_sq | ivf_flat | ivf_sq8 |\n"
        "                      ivf_pq | diskann | gpu_cagra | gpu_ivf_flat | gpu_ivf_pq |\n"
        "                      gpu_brute_force, checked with its --param against the\n"
        "                      collection's dim and metric before anything changes\n"
        "  --param K=V         index build parameter, repeatable (M=16, efConstruction=200)\n"
        "  --drop              drop the collection's index instead\n"
        "  --no-wait           return once the build is queued (default: wait and report)\n"
        "Growing rows are sealed first (sx_flush) so that every row gets the index, and runs\n"
        "of small sealed segments are merged (sx_compact; up to 2 GiB of vectors for\n"
        "diskann, as with import).\n"
        "Exit status: 0 ok, 1 failure (the build failed: its reason), 2 usage error.\n"
        "%s",
        CLI_STORAGE_USAGE);
}

int cli_index(int argc, char **argv)
{
    const char *cmd = "index";
    const char *data = NULL, *name = NULL, *index = NULL, *v = NULL;
    bool drop = false, no_wait = false;
    cli_params params = { 0 };
    cli_storage sto = { 0 };
    sx_db *db = NULL;
    sx_collection *c = NULL;
    int rc = CLI_EXIT_FAIL;
    for (int i = 1; i < argc;) {
        int r;
        if (cli_flag(argv, &i, "--help") || cli_flag(argv, &i, "-h")) {
            index_usage(stdout);
            rc = CLI_EXIT_OK;
            goto out;
        }
        if (cli_flag(argv, &i, "--drop")) {
            drop = true;
            continue;
        }
        if (cli_flag(argv, &i, "--no-wait")) {
            no_wait = true;
            continue;
        }
        if ((r = cli_take_storage(argc, argv, &i, cmd, &sto)) != 0) {
            if (r < 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--data", &data)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--collection", &name)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--index", &index)) != 0) {
            if (r < 0)
                goto usage;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--param", &v)) != 0) {
            if (r < 0 || cli_params_add(&params, cmd, v) != 0)
                goto usage;
            continue;
        }
        rc = cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
        goto out;
    }
    if (!data || !name) {
        rc = cli_usage_error(cmd, "--data and --collection are required");
        goto out;
    }
    if (drop == (index != NULL)) {
        rc = cli_usage_error(cmd, "give exactly one of --index T and --drop");
        goto out;
    }
    if (drop && params.n) {
        rc = cli_usage_error(cmd, "--param goes with --index, not --drop");
        goto out;
    }
    if (cli_storage_check(cmd, &sto) != 0)
        goto usage;
    char dbfile[4200];
    snprintf(dbfile, sizeof dbfile, "%s/collections", data);
    if (access(dbfile, F_OK) != 0 && !sto.url) {
        rc = cli_fail(cmd, "%s is not a database directory (no collections/)", data);
        goto out;
    }
    sx_db_options o = { 0 };
    cli_storage_apply(&sto, &o);
    if (index != NULL && strcasecmp(index, "diskann") == 0)
        o.merge_max_bytes = 2ull << 30; /* merged up to Milvus's diskSegmentMaxSize (import) */
    sx_status st = sx_db_open(data, &o, &db);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "open", st);
        goto out;
    }
    st = sx_collection_open(db, name, &c);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "open collection", st);
        goto out;
    }
    if (drop) {
        st = sx_index_drop(c);
        if (st != SX_OK) {
            rc = cli_sx_fail(cmd, "drop index", st);
            goto out;
        }
        printf("index of collection %s dropped\n", name);
        rc = CLI_EXIT_OK;
        goto out;
    }
    sx_collection_info ci;
    st = sx_collection_describe(c, &ci);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "describe", st);
        goto out;
    }
    uint32_t dim = 0;
    for (size_t j = 0; j < ci.n_fields; j++)
        if (ci.fields[j].type == SX_FIELD_FLOAT_VECTOR)
            dim = ci.fields[j].dim;
    int crc = import_check_index(cmd, c, name, index, &params, dim, ci.metric);
    if (crc != 0) {
        rc = crc;
        goto out;
    }
    st = sx_flush(c);
    if (st != SX_OK) {
        rc = cli_sx_fail(cmd, "flush", st);
        goto out;
    }
    if (merge_segments(cmd, c) != 0)
        goto out;
    if (no_wait) {
        st = sx_index_create(c, index, params.p, params.n);
        if (st != SX_OK) {
            rc = cli_sx_fail(cmd, "create index", st);
            goto out;
        }
        printf("index %s queued on collection %s (%" PRIu64 " rows)\n", index, name, ci.n_rows);
        rc = CLI_EXIT_OK;
        goto out;
    }
    rc = import_index(cmd, c, index, &params) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
    goto out;
usage:
    rc = CLI_EXIT_USAGE;
out:
    cli_params_fini(&params);
    sx_collection_release(c);
    sx_db_close(db);
    return rc;
}
