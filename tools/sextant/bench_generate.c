/*
 * bench_generate.c: `sextant bench generate`: writes a synthetic dataset of the bench's
 * generators (datasets.h) to files, with its exact ground truth, for runs whose data must not be
 * held in memory (issue 14: `bench/beyond_ram.sh` imports the files into a collection many times
 * larger than the memory limit and searches it with `sextant search --gt`):
 *
 *   sextant bench generate --synthetic N,DIM[,SEED] [--generate KIND] [--nq N] [--k N]
 *                          [--metric l2|ip|cosine] --out DIR
 *
 * DIR/base.fvecs      N rows, stream 0 of the model (the rows `sextant bench --synthetic` inserts)
 * DIR/query.fvecs     nq rows (default 1000), stream 1
 * DIR/gt.ivecs        the exact k (default 100) nearest base rows of each query, best first
 * DIR/gt-dist.fvecs   their distances: Euclidean for l2, the similarity for ip / cosine (the
 *                     forms `sextant bench` and `sextant search --gt-dist` read)
 * DIR/dataset.json    what the files hold (generator, n, dim, seed, nq, k, metric); a directory
 *                     whose dataset.json and file sizes already match is left as it is
 *
 * Memory is bounded by the chunk, not N: rows are generated CHUNK at a time (ds_generate_rows),
 * appended to base.fvecs, and scored against all queries with one sgemm (OpenBLAS) per chunk.
 * Exactness: the sgemm scores only select candidates; a row whose float score comes within a
 * margin of the query's current k-th best is rescored in double from the vectors and kept by
 * that value, so the ground truth is the double-precision top k (the margin, 1e-4 of the norms'
 * scale, is far above float32 rounding of a dot product of these sizes). Files are written to
 * NAME.tmp and renamed, dataset.json last, so an interrupted run leaves no file that looks done.
 *
 * Single-threaded apart from OpenBLAS's own threads in sgemm.
 */
#include "bench_generate.h"

#include <cblas.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "datasets.h"

#define CHUNK    16384
#define PATH_LEN 4096

typedef struct gen_opts {
    ds_gen gen;
    size_t n, dim, nq, k;
    uint64_t seed;
    sx_metric metric;
    const char *out;
} gen_opts;

/* Per query: a max-heap of the k best keys (lower is better: squared L2, or -similarity). */
typedef struct topk {
    double *key;
    int32_t *id;
    size_t n;
} topk;

static void heap_push(topk *h, size_t k, double key, int32_t id)
{
    size_t j;
    if (h->n < k) {
        j = h->n++;
        while (j > 0 && h->key[(j - 1) / 2] < key) {
            h->key[j] = h->key[(j - 1) / 2];
            h->id[j] = h->id[(j - 1) / 2];
            j = (j - 1) / 2;
        }
    } else {
        if (key >= h->key[0])
            return;
        j = 0;
        for (;;) {
            size_t c = 2 * j + 1;
            if (c >= k)
                break;
            if (c + 1 < k && h->key[c + 1] > h->key[c])
                c++;
            if (h->key[c] <= key)
                break;
            h->key[j] = h->key[c];
            h->id[j] = h->id[c];
            j = c;
        }
    }
    h->key[j] = key;
    h->id[j] = id;
}

/* Exact key of (q, x) in double: squared L2, or -dot (vectors already unit for cosine). */
static double exact_key(sx_metric m, const float *q, const float *x, size_t dim)
{
    double s = 0;
    if (m == SX_METRIC_L2) {
        for (size_t j = 0; j < dim; j++) {
            double d = (double)q[j] - (double)x[j];
            s += d * d;
        }
        return s;
    }
    for (size_t j = 0; j < dim; j++)
        s += (double)q[j] * (double)x[j];
    return -s;
}

static void normalize_rows(float *v, size_t n, size_t dim)
{
    for (size_t r = 0; r < n; r++) {
        double nn = 0;
        for (size_t j = 0; j < dim; j++)
            nn += (double)v[r * dim + j] * (double)v[r * dim + j];
        double inv = nn > 0 ? 1.0 / sqrt(nn) : 0.0;
        for (size_t j = 0; j < dim; j++)
            v[r * dim + j] = (float)((double)v[r * dim + j] * inv);
    }
}

static const char *metric_name(sx_metric m)
{
    return m == SX_METRIC_L2 ? "l2" : m == SX_METRIC_IP ? "ip" : "cosine";
}

static void path_of(char *dst, const gen_opts *o, const char *name)
{
    snprintf(dst, PATH_LEN, "%s/%s", o->out, name);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

static void meta_text(const gen_opts *o, char *buf, size_t len)
{
    snprintf(buf, len,
             "{\"generator\": \"%s\", \"n\": %zu, \"dim\": %zu, \"seed\": %" PRIu64
             ", \"nq\": %zu, \"k\": %zu, \"metric\": \"%s\", \"files\": [\"base.fvecs\", "
             "\"query.fvecs\", \"gt.ivecs\", \"gt-dist.fvecs\"]}\n",
             ds_gen_name(o->gen), o->n, o->dim, o->seed, o->nq, o->k, metric_name(o->metric));
}

/* 1 when DIR already holds this dataset (same dataset.json, files of the right sizes). */
static int up_to_date(const gen_opts *o)
{
    char p[PATH_LEN], want[512], got[512];
    path_of(p, o, "dataset.json");
    FILE *f = fopen(p, "rb");
    if (f == NULL)
        return 0;
    size_t n = fread(got, 1, sizeof got - 1, f);
    (void)fclose(f);
    got[n] = '\0';
    meta_text(o, want, sizeof want);
    if (strcmp(want, got) != 0)
        return 0;
    const long long rec = 4 + 4 * (long long)o->dim, grec = 4 + 4 * (long long)o->k;
    path_of(p, o, "base.fvecs");
    if (file_size(p) != rec * (long long)o->n)
        return 0;
    path_of(p, o, "query.fvecs");
    if (file_size(p) != rec * (long long)o->nq)
        return 0;
    path_of(p, o, "gt.ivecs");
    if (file_size(p) != grec * (long long)o->nq)
        return 0;
    path_of(p, o, "gt-dist.fvecs");
    return file_size(p) == grec * (long long)o->nq;
}

/* Appends rows as .fvecs records. Returns 0 or -1 (errno set). */
static int write_records(FILE *f, const float *v, size_t n, size_t dim)
{
    uint32_t d = (uint32_t)dim; /* TEXMEX: little-endian int32 dim, then the values */
    for (size_t r = 0; r < n; r++) {
        if (fwrite(&d, 4, 1, f) != 1 || fwrite(v + r * dim, 4, dim, f) != dim)
            return -1;
    }
    return 0;
}

/* Scores one chunk of base rows (ids first..first+n-1) against every query. */
static void score_chunk(const gen_opts *o,
                        const float *q,
                        const double *qn,
                        const float *x,
                        size_t n,
                        size_t first,
                        float *s,
                        topk *heaps)
{
    const size_t dim = o->dim;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)o->nq, (blasint)n, (blasint)dim,
                1.0f, q, (blasint)dim, x, (blasint)dim, 0.0f, s, (blasint)n);
    double *xn = malloc(n * sizeof *xn);
    if (xn == NULL)
        abort(); /* n <= CHUNK doubles; the caller's buffers are far larger */
    for (size_t r = 0; r < n; r++) {
        double nn = 0;
        for (size_t j = 0; j < dim; j++)
            nn += (double)x[r * dim + j] * (double)x[r * dim + j];
        xn[r] = nn;
    }
    const bool l2 = o->metric == SX_METRIC_L2;
    for (size_t i = 0; i < o->nq; i++) {
        topk *h = &heaps[i];
        const float *si = s + i * n;
        for (size_t r = 0; r < n; r++) {
            double approx = l2 ? qn[i] + xn[r] - 2.0 * (double)si[r] : -(double)si[r];
            double margin = 1e-4 * (l2 ? qn[i] + xn[r] : sqrt(qn[i] * xn[r])) + 1e-9;
            if (h->n == o->k && approx > h->key[0] + margin)
                continue;
            heap_push(h, o->k, exact_key(o->metric, q + i * dim, x + r * dim, dim),
                      (int32_t)(first + r));
        }
    }
    free(xn);
}

/* Sorts a heap's entries best first (insertion sort: k is small). */
static void sort_heap(topk *h)
{
    for (size_t a = 1; a < h->n; a++) {
        double kk = h->key[a];
        int32_t id = h->id[a];
        size_t b = a;
        while (b > 0 && (h->key[b - 1] > kk || (h->key[b - 1] == kk && h->id[b - 1] > id))) {
            h->key[b] = h->key[b - 1];
            h->id[b] = h->id[b - 1];
            b--;
        }
        h->key[b] = kk;
        h->id[b] = id;
    }
}

static int fail_io(const char *what, const char *path)
{
    return cli_fail("bench generate", "%s %s: %s", what, path, strerror(errno));
}

static int finish_file(const char *tmp, const char *final)
{
    if (rename(tmp, final) != 0)
        return fail_io("cannot rename", tmp);
    return 0;
}

/* The base file and the ground truth, in one pass over the generated rows. */
static int generate(const gen_opts *o)
{
    char err[512], p[PATH_LEN], tmp[PATH_LEN + 8];
    ds_matrix q = { 0 }, x = { 0 };
    int rc = CLI_EXIT_FAIL;
    FILE *f = NULL;
    float *s = malloc((size_t)CHUNK * o->nq * sizeof *s);
    double *qn = malloc(o->nq * sizeof *qn);
    topk *heaps = calloc(o->nq, sizeof *heaps);
    double *keys = malloc(o->nq * o->k * sizeof *keys);
    int32_t *ids = malloc(o->nq * o->k * sizeof *ids);
    float *dist = malloc(o->nq * o->k * sizeof *dist);
    if (s == NULL || qn == NULL || heaps == NULL || keys == NULL || ids == NULL || dist == NULL) {
        rc = cli_fail("bench generate", "out of memory for %zu queries", o->nq);
        goto out;
    }
    for (size_t i = 0; i < o->nq; i++) {
        heaps[i].key = keys + i * o->k;
        heaps[i].id = ids + i * o->k;
    }
    if (ds_generate_rows(o->gen, o->n, o->dim, o->seed, 1, 0, o->nq, &q, err, sizeof err) != 0) {
        rc = cli_fail("bench generate", "%s", err);
        goto out;
    }
    path_of(p, o, "query.fvecs");
    if (ds_write_vecs(p, q.n, q.dim, q.f, NULL, err, sizeof err) != 0) {
        rc = cli_fail("bench generate", "%s", err);
        goto out;
    }
    if (o->metric == SX_METRIC_COSINE)
        normalize_rows(q.f, q.n, q.dim);
    for (size_t i = 0; i < o->nq; i++)
        qn[i] = -exact_key(SX_METRIC_IP, q.f + i * o->dim, q.f + i * o->dim, o->dim);
    path_of(p, o, "base.fvecs");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    f = fopen(tmp, "wb");
    if (f == NULL) {
        rc = fail_io("cannot create", tmp);
        goto out;
    }
    for (size_t first = 0; first < o->n; first += CHUNK) {
        size_t n = o->n - first < CHUNK ? o->n - first : CHUNK;
        if (ds_generate_rows(o->gen, o->n, o->dim, o->seed, 0, first, n, &x, err, sizeof err) !=
            0) {
            rc = cli_fail("bench generate", "%s", err);
            goto out;
        }
        if (write_records(f, x.f, n, o->dim) != 0) {
            rc = fail_io("cannot write", tmp);
            goto out;
        }
        if (o->metric == SX_METRIC_COSINE)
            normalize_rows(x.f, n, o->dim);
        score_chunk(o, q.f, qn, x.f, n, first, s, heaps);
        ds_free(&x);
        if (((first / CHUNK) & 31) == 31)
            fprintf(stderr, "sextant bench generate: %zu of %zu rows\n", first + n, o->n);
    }
    if (fclose(f) != 0) {
        f = NULL;
        rc = fail_io("cannot write", tmp);
        goto out;
    }
    f = NULL;
    if (finish_file(tmp, p) != 0)
        goto out;
    size_t kk = o->k < o->n ? o->k : o->n;
    for (size_t i = 0; i < o->nq; i++) {
        sort_heap(&heaps[i]);
        for (size_t j = 0; j < kk; j++) {
            double key = heaps[i].key[j];
            ids[i * kk + j] = heaps[i].id[j];
            dist[i * kk + j] = (float)(o->metric == SX_METRIC_L2 ? sqrt(key) : -key);
        }
    }
    path_of(p, o, "gt.ivecs");
    if (ds_write_vecs(p, o->nq, kk, NULL, ids, err, sizeof err) != 0) {
        rc = cli_fail("bench generate", "%s", err);
        goto out;
    }
    path_of(p, o, "gt-dist.fvecs");
    if (ds_write_vecs(p, o->nq, kk, dist, NULL, err, sizeof err) != 0) {
        rc = cli_fail("bench generate", "%s", err);
        goto out;
    }
    rc = CLI_EXIT_OK;
out:
    if (f != NULL)
        (void)fclose(f);
    ds_free(&q);
    ds_free(&x);
    free(s);
    free(qn);
    free(heaps);
    free(keys);
    free(ids);
    free(dist);
    return rc;
}

static int write_meta(const gen_opts *o)
{
    char p[PATH_LEN], tmp[PATH_LEN + 8], text[512];
    path_of(p, o, "dataset.json");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    meta_text(o, text, sizeof text);
    FILE *f = fopen(tmp, "wb");
    if (f == NULL)
        return fail_io("cannot create", tmp);
    size_t len = strlen(text);
    if (fwrite(text, 1, len, f) != len) {
        (void)fclose(f);
        return fail_io("cannot write", tmp);
    }
    if (fclose(f) != 0)
        return fail_io("cannot write", tmp);
    return finish_file(tmp, p) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAIL;
}

static void usage(FILE *out)
{
    fprintf(out,
            "usage: sextant bench generate --synthetic N,DIM[,SEED] --out DIR [options]\n"
            "\n"
            "Writes the generated base and queries and their exact ground truth to files:\n"
            "DIR/base.fvecs, query.fvecs, gt.ivecs, gt-dist.fvecs and dataset.json. Memory\n"
            "stays bounded (16,384 rows at a time), so N x DIM may exceed the machine's RAM.\n"
            "\n"
            "  --synthetic N,DIM[,S]  rows, dimension, seed (default 1)\n"
            "  --generate KIND        clustered (default) | anisotropic | cosine (as bench)\n"
            "  --nq N                 queries (default 1000)\n"
            "  --k N                  ground-truth neighbours per query (default 100)\n"
            "  --metric M             l2 | ip | cosine (default l2)\n"
            "  --out DIR              output directory (created; a matching dataset is kept)\n");
}

static int parse(gen_opts *o, int argc, char **argv)
{
    const char *cmd = "bench generate", *v = NULL, *syn = NULL;
    for (int i = 1; i < argc;) {
        int r;
        uint64_t u;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            usage(stdout);
            return -1;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--synthetic", &syn)) != 0 ||
            (r = cli_take(argc, argv, &i, cmd, "--out", &o->out)) != 0) {
            if (r < 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--generate", &v)) != 0) {
            if (r < 0 || ds_gen_parse(v, &o->gen) != 0)
                return cli_usage_error(cmd, "--generate: clustered, anisotropic or cosine");
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--metric", &v)) != 0) {
            if (r < 0 || cli_parse_metric(cmd, v, &o->metric) != 0)
                return CLI_EXIT_USAGE;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--nq", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--nq", v, 1, 1000000, &u) != 0)
                return CLI_EXIT_USAGE;
            o->nq = (size_t)u;
            continue;
        }
        if ((r = cli_take(argc, argv, &i, cmd, "--k", &v)) != 0) {
            if (r < 0 || cli_parse_u64(cmd, "--k", v, 1, 1000, &u) != 0)
                return CLI_EXIT_USAGE;
            o->k = (size_t)u;
            continue;
        }
        return cli_usage_error(cmd, "unknown argument '%s'", argv[i]);
    }
    if (syn == NULL || o->out == NULL)
        return cli_usage_error(cmd, "--synthetic and --out are required");
    char store[128];
    const char *items[3];
    int cnt = cli_split_list(cmd, "--synthetic", syn, store, sizeof store, items, 3);
    uint64_t n, dim, seed = 1;
    if (cnt < 2)
        return cli_usage_error(cmd, "--synthetic '%s' is not N,DIM[,SEED]", syn);
    if (cli_parse_u64(cmd, "--synthetic N", items[0], 1, INT32_MAX, &n) != 0 ||
        cli_parse_u64(cmd, "--synthetic DIM", items[1], 1, SX_MAX_DIM, &dim) != 0 ||
        (cnt == 3 && cli_parse_u64(cmd, "--synthetic SEED", items[2], 0, UINT64_MAX, &seed) != 0))
        return CLI_EXIT_USAGE;
    o->n = (size_t)n;
    o->dim = (size_t)dim;
    o->seed = seed;
    return 0;
}

int cli_bench_generate(int argc, char **argv)
{
    gen_opts o = { .gen = DS_GEN_CLUSTERED, .nq = 1000, .k = 100, .metric = SX_METRIC_L2 };
    int rc = parse(&o, argc, argv);
    if (rc != 0)
        return rc < 0 ? CLI_EXIT_OK : rc;
    /* the directory and its missing parents, as mkdir -p */
    char dirs[4096];
    if (snprintf(dirs, sizeof dirs, "%s", o.out) >= (int)sizeof dirs)
        return cli_usage_error("bench generate", "--out path too long");
    for (char *p = dirs + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(dirs, 0755) != 0 && errno != EEXIST)
            return fail_io("cannot create", dirs);
        *p = '/';
    }
    if (mkdir(o.out, 0755) != 0 && errno != EEXIST)
        return fail_io("cannot create", o.out);
    if (up_to_date(&o)) {
        printf("%s: %s %zu x %zu seed %" PRIu64 " is already there\n", o.out, ds_gen_name(o.gen),
               o.n, o.dim, o.seed);
        return CLI_EXIT_OK;
    }
    char p[PATH_LEN];
    path_of(p, &o, "dataset.json");
    (void)remove(p); /* what follows replaces the files: they stop describing a dataset now */
    double t0 = cli_now();
    rc = generate(&o);
    if (rc == CLI_EXIT_OK)
        rc = write_meta(&o);
    if (rc == CLI_EXIT_OK)
        printf("%s: %s %zu x %zu seed %" PRIu64 ", %zu queries, top %zu (%s) in %.1f s\n", o.out,
               ds_gen_name(o.gen), o.n, o.dim, o.seed, o.nq, o.k < o.n ? o.k : o.n,
               metric_name(o.metric), cli_now() - t0);
    return rc;
}
