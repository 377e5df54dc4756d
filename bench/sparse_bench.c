/*
 * sparse_bench.c: sparse-vector search on a real text corpus, MaxScore against exhaustive
 * scoring, in one run (bench/sparse_bench.sh pins it to one core).
 *
 * Corpus: the WordNet 3.0 glosses of Debian's wordnet-base (/usr/share/wordnet/data.{noun,verb,
 * adj,adv}: 117,659 definitions). Each gloss is tokenised here (ASCII letters and digits,
 * lowercased, tokens of one character and a short stop list dropped) and stored as the sparse
 * vector of its term frequencies over a vocabulary numbered in order of first appearance, as a
 * BM25 function output holds them. A query is the distinct tokens of another gloss's first words
 * (2 to 6 terms, count 1 each), searched with the engine's BM25 scoring (k1 1.2, b 0.75; idf and
 * average length over the live rows). Ground truth: BM25 computed here by brute force in double
 * over the same corpus (its own postings), top 10 by score then id; an engine answer is correct
 * when its ids are those (a swap between equal scores allowed). Both search modes are also
 * checked against each other (ids and float scores equal) for every query.
 *
 * Reported (one line each, then one JSON object): rows, terms, segments; the time the first
 * search took to build every segment's inverted lists, and their memory (the budget's index
 * bytes); the queries whose top 10 equals the ground truth; per mode the queries per second at
 * k = 10 over all queries, one thread; the ratio.
 *
 * usage: sparse_bench DIR [queries] [rows_per_segment]   (DIR: a scratch directory, removed)
 */
#include <ctype.h>
#include <math.h>
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_DOCS  200000
#define MAX_TOKS  512
#define HASH_BITS 20

static const char *const stop[] = { "the", "of",    "a",    "an", "or",  "and",  "to",
                                    "in",  "for",   "by",   "as", "on",  "with", "that",
                                    "is",  "be",    "from", "at", "its", "it",   "used",
                                    "who", "which", "etc",  NULL };

/* ---------------------------------------------------------------- vocabulary */

typedef struct term {
    char *s;
    uint32_t id;
    uint32_t df;
} term;

static term *table[1u << HASH_BITS];
static term *terms_by_id[1u << HASH_BITS];
static uint32_t n_terms;

static uint32_t fnv(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

static term *intern(const char *s)
{
    uint32_t h = fnv(s) & ((1u << HASH_BITS) - 1);
    while (table[h] && strcmp(table[h]->s, s) != 0)
        h = (h + 1) & ((1u << HASH_BITS) - 1);
    if (!table[h]) {
        term *t = calloc(1, sizeof *t);
        t->s = strdup(s);
        t->id = n_terms;
        terms_by_id[n_terms++] = t;
        table[h] = t;
    }
    return table[h];
}

static bool is_stop(const char *s)
{
    for (size_t i = 0; stop[i]; i++)
        if (strcmp(stop[i], s) == 0)
            return true;
    return s[1] == '\0';
}

/* ---------------------------------------------------------------- documents */

typedef struct doc {
    uint32_t n;     /* distinct terms */
    uint32_t len;   /* tokens */
    uint32_t *term; /* ascending ids */
    uint32_t *tf;
} doc;

static doc docs[MAX_DOCS];
static size_t n_docs;
static uint32_t first_words[MAX_DOCS][6];
static uint32_t n_first[MAX_DOCS];

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static void add_gloss(const char *g)
{
    if (n_docs == MAX_DOCS)
        return;
    uint32_t toks[MAX_TOKS];
    size_t nt = 0;
    char w[64];
    size_t wl = 0;
    for (const char *p = g;; p++) {
        if (isalnum((unsigned char)*p)) {
            if (wl + 1 < sizeof w)
                w[wl++] = (char)tolower((unsigned char)*p);
            continue;
        }
        if (wl) {
            w[wl] = '\0';
            if (!is_stop(w) && nt < MAX_TOKS) {
                uint32_t id = intern(w)->id;
                if (n_first[n_docs] < 6) {
                    bool seen = false;
                    for (uint32_t k = 0; k < n_first[n_docs]; k++)
                        seen |= first_words[n_docs][k] == id;
                    if (!seen)
                        first_words[n_docs][n_first[n_docs]++] = id;
                }
                toks[nt++] = id;
            }
            wl = 0;
        }
        if (!*p || *p == '\n')
            break;
    }
    if (nt == 0) {
        n_first[n_docs] = 0;
        return;
    }
    qsort(toks, nt, sizeof *toks, cmp_u32);
    doc *d = &docs[n_docs++];
    d->term = malloc(nt * sizeof *d->term);
    d->tf = malloc(nt * sizeof *d->tf);
    d->len = (uint32_t)nt;
    for (size_t i = 0; i < nt; i++) {
        if (d->n && d->term[d->n - 1] == toks[i]) {
            d->tf[d->n - 1]++;
        } else {
            d->term[d->n] = toks[i];
            d->tf[d->n++] = 1;
            terms_by_id[toks[i]]->df++;
        }
    }
}

static size_t read_wordnet(void)
{
    static const char *const files[] = { "data.noun", "data.verb", "data.adj", "data.adv" };
    for (size_t f = 0; f < 4; f++) {
        char path[256];
        snprintf(path, sizeof path, "/usr/share/wordnet/%s", files[f]);
        FILE *fp = fopen(path, "r");
        if (!fp) {
            fprintf(stderr, "sparse_bench: %s: not found (apt-get install wordnet-base)\n", path);
            return 0;
        }
        static char line[1 << 16];
        while (fgets(line, sizeof line, fp)) {
            if (line[0] == ' ')
                continue; /* the license header */
            const char *g = strstr(line, " | ");
            if (g)
                add_gloss(g + 3);
        }
        fclose(fp);
    }
    return n_docs;
}

/* ---------------------------------------------------------------- the run */

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

#define CHECK(expr)                                                                       \
 do {                                                                                     \
  sx_status st_ = (expr);                                                                 \
  if (st_ != SX_OK) {                                                                     \
   fprintf(stderr, "sparse_bench: %s: %s: %s\n", #expr, sx_status_str(st_), sx_errmsg()); \
   exit(1);                                                                               \
  }                                                                                       \
 } while (0)

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: sparse_bench DIR [queries] [rows_per_segment]\n");
        return 2;
    }
    size_t nq = argc > 2 ? (size_t)atol(argv[2]) : 2000;
    size_t seg_rows = argc > 3 ? (size_t)atol(argv[3]) : 30000;
    if (!read_wordnet())
        return 77;
    const double k1 = 1.2, b = 0.75;
    double avgdl = 0;
    for (size_t i = 0; i < n_docs; i++)
        avgdl += docs[i].len;
    avgdl /= (double)n_docs;

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", argv[1]);
    if (system(cmd) != 0)
        return 1;
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    o.segment_max_bytes = (uint64_t)seg_rows * 4; /* the dense field's 4 bytes a row */
    sx_db *db = NULL;
    CHECK(sx_db_open(argv[1], &o, &db));
    sx_field_def f[] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                         { .name = "v", .type = SX_FIELD_FLOAT_VECTOR, .dim = 1 },
                         { .name = "sp", .type = SX_FIELD_VARCHAR, .max_length = 65535 } };
    sx_collection_def def = { "gloss", f, 3, SX_METRIC_L2 };
    CHECK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    CHECK(sx_collection_open(db, "gloss", &c));
    /* rows in batches of 5,000: BM25 document weights */
    size_t batch = 5000;
    int64_t *ids = malloc(batch * sizeof *ids);
    float *dense = calloc(batch, sizeof *dense);
    char **txt = malloc(batch * sizeof *txt);
    uint32_t *ti = malloc(MAX_TOKS * sizeof *ti);
    float *tv = malloc(MAX_TOKS * sizeof *tv);
    double t0 = now_s();
    for (size_t at = 0; at < n_docs; at += batch) {
        size_t n = n_docs - at < batch ? n_docs - at : batch;
        for (size_t i = 0; i < n; i++) {
            const doc *d = &docs[at + i];
            for (uint32_t k = 0; k < d->n; k++) {
                ti[k] = d->term[k];
                tv[k] = (float)d->tf[k];
            }
            size_t len = sx_sparse_format(ti, tv, d->n, NULL, 0);
            txt[i] = malloc(len + 1);
            (void)sx_sparse_format(ti, tv, d->n, txt[i], len + 1);
            ids[i] = (int64_t)(at + i);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids, NULL },
                             { "v", SX_FIELD_FLOAT_VECTOR, dense, NULL },
                             { "sp", SX_FIELD_VARCHAR, txt, NULL } };
        sx_batch bt = { n, cols, 3 };
        CHECK(sx_insert(c, &bt, NULL));
        for (size_t i = 0; i < n; i++)
            free(txt[i]);
    }
    CHECK(sx_flush(c));
    double t_ins = now_s() - t0;
    sx_collection_info ci;
    CHECK(sx_collection_describe(c, &ci));

    /* queries: the first distinct words of every (n_docs / nq)-th gloss, idf-weighted */
    sx_sparse_query *qs = calloc(nq, sizeof *qs);
    size_t made = 0;
    for (size_t i = 0; made < nq && i < n_docs; i += n_docs / nq ? n_docs / nq : 1) {
        uint32_t n = n_first[i] < 2 ? 0 : n_first[i];
        if (!n)
            continue;
        uint32_t *qi = malloc(n * sizeof *qi);
        float *qv = malloc(n * sizeof *qv);
        memcpy(qi, first_words[i], n * sizeof *qi);
        qsort(qi, n, sizeof *qi, cmp_u32);
        for (uint32_t k = 0; k < n; k++)
            qv[k] = 1;
        qs[made++] = (sx_sparse_query){ qi, qv, n };
    }
    nq = made;
    sx_sparse_req req = { .field = "sp",
                          .queries = qs,
                          .nq = 1,
                          .k = 10,
                          .scoring = SX_SPARSE_BM25,
                          .bm25_k1 = (float)k1,
                          .bm25_b = (float)b };
    /* the first search builds every sealed segment's inverted lists */
    sx_memory_stats m0, m1;
    sx_db_memory_stats(db, &m0);
    t0 = now_s();
    sx_rowset *r = NULL;
    CHECK(sx_sparse_search(c, &req, &r));
    sx_rowset_free(r);
    double t_build = now_s() - t0;
    sx_db_memory_stats(db, &m1);
    /* the two modes, one query at a time, all queries; answers compared */
    double qps[2];
    sx_rowset **ans[2];
    for (int mode = 0; mode < 2; mode++) {
        ans[mode] = calloc(nq, sizeof *ans[mode]);
        req.exhaustive = mode == 1;
        t0 = now_s();
        for (size_t q = 0; q < nq; q++) {
            req.queries = &qs[q];
            CHECK(sx_sparse_search(c, &req, &ans[mode][q]));
        }
        qps[mode] = (double)nq / (now_s() - t0);
    }
    /* ground truth: postings of the corpus, brute-force BM25 per query */
    uint32_t *post_start = calloc(n_terms + 1, sizeof *post_start);
    size_t n_post = 0;
    for (size_t i = 0; i < n_docs; i++)
        for (uint32_t k = 0; k < docs[i].n; k++)
            post_start[docs[i].term[k] + 1]++;
    for (uint32_t t = 0; t < n_terms; t++)
        post_start[t + 1] += post_start[t];
    n_post = post_start[n_terms];
    uint32_t *post_doc = malloc(n_post * sizeof *post_doc), *fill = calloc(n_terms, 4);
    uint32_t *post_tf = malloc(n_post * sizeof *post_tf);
    for (size_t i = 0; i < n_docs; i++)
        for (uint32_t k = 0; k < docs[i].n; k++) {
            uint32_t t = docs[i].term[k], at = post_start[t] + fill[t]++;
            post_doc[at] = (uint32_t)i;
            post_tf[at] = docs[i].tf[k];
        }
    double *acc = calloc(n_docs, sizeof *acc);
    size_t truth_ok = 0;
    for (size_t q = 0; q < nq; q++) {
        const sx_sparse_query *x = &qs[q];
        for (size_t k = 0; k < x->nnz; k++) {
            uint32_t t = x->idx[k];
            double df = post_start[t + 1] - post_start[t];
            double idf = log(1 + ((double)n_docs - df + 0.5) / (df + 0.5));
            for (uint32_t p = post_start[t]; p < post_start[t + 1]; p++) {
                double tf = post_tf[p], dl = docs[post_doc[p]].len;
                acc[post_doc[p]] += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl));
            }
        }
        /* the top 10 by (score desc, id asc), and the 10th score */
        size_t best[10], nb = 0;
        for (size_t i = 0; i < n_docs; i++) {
            if (acc[i] <= 0)
                continue;
            size_t at = nb < 10 ? nb++ : 10;
            if (at == 10 && acc[i] <= acc[best[9]])
                continue;
            if (at == 10)
                at = 9;
            while (at > 0 && acc[best[at - 1]] < acc[i]) {
                best[at] = best[at - 1];
                at--;
            }
            best[at] = i;
        }
        const sx_rowset *a = ans[0][q];
        bool eq = a->n_rows == nb;
        for (size_t h = 0; eq && h < nb; h++) {
            size_t id = (size_t)((const int64_t *)a->cols[0].data)[h];
            eq = id == best[h] || fabs(acc[id] - acc[best[h]]) <= 1e-9 * acc[best[h]];
        }
        truth_ok += eq;
        for (size_t k = 0; k < x->nnz; k++) { /* reset only what was touched */
            uint32_t t = x->idx[k];
            for (uint32_t p = post_start[t]; p < post_start[t + 1]; p++)
                acc[post_doc[p]] = 0;
        }
    }
    size_t same = 0, hits = 0;
    for (size_t q = 0; q < nq; q++) {
        const sx_rowset *a = ans[0][q], *e = ans[1][q];
        bool eq = a->n_rows == e->n_rows;
        for (size_t h = 0; eq && h < a->n_rows; h++)
            eq = ((const int64_t *)a->cols[0].data)[h] == ((const int64_t *)e->cols[0].data)[h] &&
                 a->distances[h] == e->distances[h];
        same += eq;
        hits += a->n_rows;
        sx_rowset_free(ans[0][q]);
        sx_rowset_free(ans[1][q]);
    }
    printf("corpus: %zu WordNet glosses, %u terms, avg %.1f tokens; %llu segments; insert + flush "
           "%.2f s\n",
           n_docs, n_terms, avgdl, (unsigned long long)ci.n_segments, t_ins);
    printf("inverted lists: built by the first search in %.3f s, %.1f MiB (index memory)\n",
           t_build, (double)(m1.index_bytes - m0.index_bytes) / 1048576.0);
    printf("queries: %zu (2-6 terms), BM25, k 10, one thread; %zu hits; top 10 = exact BM25 on "
           "%zu of %zu; MaxScore = exhaustive on %zu of %zu\n",
           nq, hits, truth_ok, nq, same, nq);
    printf("QPS: MaxScore %.0f, exhaustive %.0f, ratio %.2fx\n", qps[0], qps[1], qps[0] / qps[1]);
    printf("{\"rows\":%zu,\"terms\":%u,\"segments\":%llu,\"build_s\":%.3f,\"index_mib\":%.2f,"
           "\"queries\":%zu,\"exact_top10\":%zu,\"identical\":%zu,\"qps_maxscore\":%.1f,"
           "\"qps_exhaustive\":%.1f}\n",
           n_docs, n_terms, (unsigned long long)ci.n_segments, t_build,
           (double)(m1.index_bytes - m0.index_bytes) / 1048576.0, nq, truth_ok, same, qps[0],
           qps[1]);
    sx_collection_release(c);
    sx_db_close(db);
    if (system(cmd) != 0)
        return 1;
    return same == nq && truth_ok == nq ? 0 : 1;
}
