/*
 * test_model.c: model-based state test (reliability.md T7). Random sequences of insert, upsert
 * (including duplicate keys in one batch, which must be refused whole), delete by key, delete by
 * filter, flush, compact, index create/drop (FLAT, HNSW), restart (close + reopen) and
 * backup/restore (close, copy the directory, continue on the copy) run against one collection
 * and an in-memory reference model. After every step: count(*), counts under filters, get of a
 * sample of keys (present with the right values, or absent), and a top-k search compared with
 * the model's exact brute force (exact for no index / FLAT; with HNSW every hit must be a live
 * row at its true distance, and recall@10 must stay high).
 *
 * The test runs SX_MODEL_SEEDS independent sequences (default 3: the seed and the next two; each
 * prints its SX_SEED so a failure replays alone with SX_MODEL_SEEDS=1) of SX_MODEL_STEPS steps
 * each (default 4000; nightly: 1000000). SX_SEED sets the first seed (default: the time).
 */
#include <math.h>
#include <sextant.h>

#include "harness.h"

#define DIM  8
#define KEYS 1500 /* key space: collisions between inserts, upserts and deletes are common */
#define MAXB 40
#define TOPK 10

typedef struct row {
    bool live;
    float v[DIM];
    int64_t a; /* small int, for filters */
    double b;
    bool c;
    char s[16];
} row;

static row model[KEYS];
static uint64_t rs;
static sx_db *db;
static sx_collection *coll;
static char base_dir[512];
static char dir[600];
static int copy_gen;   /* backups alternate between base_dir/0 and base_dir/1 */
static int index_kind; /* 0 none, 1 FLAT, 2 HNSW */
static unsigned long divergences_checked;

static void open_db(void)
{
    sx_db_options o = { 0 };
    o.segment_max_bytes = 400 * DIM * sizeof(float); /* seal often: many segments */
    o.build_threads = 1;
    o.search_threads = 2;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "m", &coll));
}

static void close_db(void)
{
    sx_collection_release(coll);
    coll = NULL;
    sx_db_close(db);
    db = NULL;
}

static void make_row(row *r)
{
    for (int d = 0; d < DIM; d++)
        r->v[d] = test_randf(&rs);
    r->a = (int64_t)(test_rand(&rs) % 10);
    r->b = (double)test_randf(&rs) * 100.0;
    r->c = test_rand(&rs) & 1;
    snprintf(r->s, sizeof r->s, "s%u", (unsigned)(test_rand(&rs) % 50));
}

/* Insert (upsert=false) or upsert a batch of n keys; dup forces a repeated key. */
static void op_write(bool upsert, size_t n, bool dup)
{
    int64_t ids[MAXB + 1];
    static row rows[MAXB + 1];
    float v[(MAXB + 1) * DIM];
    int64_t a[MAXB + 1];
    double b[MAXB + 1];
    bool c[MAXB + 1];
    const char *s[MAXB + 1];
    bool want_fail = false;
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int64_t)(test_rand(&rs) % KEYS);
        for (size_t j = 0; j < i; j++)
            if (ids[j] == ids[i])
                want_fail = true; /* duplicate key in one batch */
        if (!upsert && model[ids[i]].live)
            want_fail = true; /* insert of an existing key */
        make_row(&rows[i]);
    }
    if (dup && n > 1) {
        ids[n - 1] = ids[0];
        want_fail = true;
    }
    for (size_t i = 0; i < n; i++) {
        memcpy(v + i * DIM, rows[i].v, sizeof rows[i].v);
        a[i] = rows[i].a;
        b[i] = rows[i].b;
        c[i] = rows[i].c;
        s[i] = rows[i].s;
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v },
                         { "a", SX_FIELD_INT64, a },    { "b", SX_FIELD_DOUBLE, b },
                         { "c", SX_FIELD_BOOL, c },     { "s", SX_FIELD_VARCHAR, s } };
    sx_batch bt = { n, cols, 6 };
    sx_status st = upsert ? sx_upsert(coll, &bt) : sx_insert(coll, &bt, NULL);
    if (want_fail) {
        if (st != SX_EEXIST)
            FAILF("%s of a batch with a repeated/existing key: %s, want SX_EEXIST",
                  upsert ? "upsert" : "insert", sx_status_str(st));
        return; /* all or nothing: the model is unchanged */
    }
    if (st != SX_OK)
        FAILF("%s of %zu rows: %s (%s)", upsert ? "upsert" : "insert", n, sx_status_str(st),
              sx_errmsg());
    for (size_t i = 0; i < n; i++) {
        model[ids[i]] = rows[i];
        model[ids[i]].live = true;
    }
}

static void op_delete_keys(size_t n)
{
    int64_t ids[MAXB];
    uint64_t want = 0;
    for (size_t i = 0; i < n; i++) {
        ids[i] = (int64_t)(test_rand(&rs) % KEYS);
        bool seen = false;
        for (size_t j = 0; j < i; j++)
            seen |= ids[j] == ids[i];
        if (!seen && model[ids[i]].live)
            want++;
    }
    sx_keys k = { n, ids, NULL };
    uint64_t got = 0;
    ASSERT_OK(sx_delete(coll, &k, &got));
    ASSERT_EQ(got, want);
    for (size_t i = 0; i < n; i++)
        model[ids[i]].live = false;
}

static bool match_filter(const row *r, int kind, int64_t x)
{
    switch (kind) {
    case 0:
        return r->a == x;
    case 1:
        return r->a < x && r->c;
    case 2:
        return r->b >= (double)x * 10.0 || r->a == 3;
    default: {
        char want[16];
        snprintf(want, sizeof want, "s%lld", (long long)x);
        return strcmp(r->s, want) == 0;
    }
    }
}

static void filter_text(int kind, int64_t x, char *buf, size_t cap)
{
    switch (kind) {
    case 0:
        snprintf(buf, cap, "a == %lld", (long long)x);
        break;
    case 1:
        snprintf(buf, cap, "a < %lld and c", (long long)x);
        break;
    case 2:
        snprintf(buf, cap, "b >= %lld.0 * 10 or a == 3", (long long)x);
        break;
    default:
        snprintf(buf, cap, "s == \"s%lld\"", (long long)x);
        break;
    }
}

static void op_delete_where(void)
{
    int kind = (int)(test_rand(&rs) % 4);
    int64_t x = (int64_t)(test_rand(&rs) % (kind == 3 ? 50 : 10));
    if (kind == 2)
        x = 9; /* b >= 90: a small slice */
    char f[96];
    filter_text(kind, x, f, sizeof f);
    uint64_t want = 0;
    for (size_t k = 0; k < KEYS; k++)
        if (model[k].live && match_filter(&model[k], kind, x))
            want++;
    uint64_t got = 0;
    ASSERT_OK(sx_delete_where(coll, f, &got));
    if (got != want)
        FAILF("delete where %s: %llu deleted, model %llu", f, (unsigned long long)got,
              (unsigned long long)want);
    for (size_t k = 0; k < KEYS; k++)
        if (model[k].live && match_filter(&model[k], kind, x))
            model[k].live = false;
}

static void op_index(void)
{
    if (index_kind != 0) {
        ASSERT_OK(sx_index_drop(coll));
        index_kind = 0;
        return;
    }
    if (test_rand(&rs) & 1) {
        ASSERT_OK(sx_index_create(coll, "FLAT", NULL, 0));
        index_kind = 1;
    } else {
        sx_param p[] = { { "M", "8" }, { "efConstruction", "64" } };
        ASSERT_OK(sx_index_create(coll, "HNSW", p, 2));
        index_kind = 2;
    }
}

static void op_restart(bool backup)
{
    close_db();
    if (backup) {
        /* Backup = a copy of the closed directory; continue on the restored copy. */
        char dst[600], cmd[2600];
        copy_gen ^= 1;
        snprintf(dst, sizeof dst, "%s/%d", base_dir, copy_gen);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -a '%s' '%s' && rm -rf '%s'", dst, dir, dst,
                 dir);
        ASSERT(system(cmd) == 0);
        memcpy(dir, dst, sizeof dir);
    }
    open_db();
}

static float l2(const float *x, const float *y)
{
    float s = 0;
    for (int d = 0; d < DIM; d++)
        s += (x[d] - y[d]) * (x[d] - y[d]);
    return s;
}

static void check(void)
{
    uint64_t live = 0;
    for (size_t k = 0; k < KEYS; k++)
        live += model[k].live;
    uint64_t n = 0;
    ASSERT_OK(sx_count(coll, NULL, &n));
    if (n != live)
        FAILF("count(*) %llu, model %llu", (unsigned long long)n, (unsigned long long)live);

    /* a filtered count */
    int kind = (int)(test_rand(&rs) % 4);
    int64_t x = (int64_t)(test_rand(&rs) % (kind == 3 ? 50 : 10));
    char f[96];
    filter_text(kind, x, f, sizeof f);
    uint64_t want = 0;
    for (size_t k = 0; k < KEYS; k++)
        want += model[k].live && match_filter(&model[k], kind, x);
    ASSERT_OK(sx_count(coll, f, &n));
    if (n != want)
        FAILF("count(%s) %llu, model %llu", f, (unsigned long long)n, (unsigned long long)want);

    /* get of a sample of keys, live and not */
    int64_t ids[16];
    for (int i = 0; i < 16; i++)
        ids[i] = (int64_t)(test_rand(&rs) % KEYS);
    sx_keys keys = { 16, ids, NULL };
    const char *out[] = { "v", "a", "b", "c", "s" };
    sx_rowset *rs_get = NULL;
    ASSERT_OK(sx_get(coll, &keys, out, 5, &rs_get));
    size_t r = 0;
    for (int i = 0; i < 16; i++) {
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup |= ids[j] == ids[i];
        const row *m = &model[ids[i]];
        if (!m->live || dup)
            continue;
        if (r >= rs_get->n_rows)
            FAILF("get: key %lld missing", (long long)ids[i]);
        const int64_t *gid = rs_get->cols[0].data;
        if (gid[r] != ids[i]) {
            /* duplicates in the request may or may not repeat: skip to the key */
            while (r < rs_get->n_rows && gid[r] != ids[i])
                r++;
            if (r >= rs_get->n_rows)
                FAILF("get: key %lld missing", (long long)ids[i]);
        }
        const float *gv = (const float *)rs_get->cols[1].data + r * DIM;
        if (memcmp(gv, m->v, sizeof m->v) != 0)
            FAILF("get: key %lld vector differs", (long long)ids[i]);
        if (((const int64_t *)rs_get->cols[2].data)[r] != m->a ||
            ((const double *)rs_get->cols[3].data)[r] != m->b ||
            ((const bool *)rs_get->cols[4].data)[r] != m->c ||
            strcmp(((char *const *)rs_get->cols[5].data)[r], m->s) != 0)
            FAILF("get: key %lld scalars differ", (long long)ids[i]);
        r++;
    }
    for (size_t i = 0; i < rs_get->n_rows; i++) {
        int64_t k = ((const int64_t *)rs_get->cols[0].data)[i];
        if (k < 0 || k >= KEYS || !model[k].live)
            FAILF("get returned key %lld which the model says is absent", (long long)k);
    }
    sx_rowset_free(rs_get);

    /* top-k search vs the model's brute force */
    float q[DIM];
    for (int d = 0; d < DIM; d++)
        q[d] = test_randf(&rs);
    bool filtered = test_rand(&rs) % 3 == 0;
    sx_param ef[] = { { "ef", "200" } };
    sx_search_req req = { .queries = q,
                          .nq = 1,
                          .k = TOPK,
                          .filter = filtered ? f : NULL,
                          .params = index_kind == 2 ? ef : NULL,
                          .n_params = index_kind == 2 ? 1 : 0,
                          .metric = -1 };
    sx_rowset *res = NULL;
    ASSERT_OK(sx_search(coll, &req, &res));
    float best[TOPK];
    size_t nb = 0;
    for (size_t k = 0; k < KEYS; k++) {
        if (!model[k].live || (filtered && !match_filter(&model[k], kind, x)))
            continue;
        float d = l2(q, model[k].v);
        if (nb < TOPK)
            best[nb++] = d;
        else if (d < best[TOPK - 1])
            best[TOPK - 1] = d;
        else
            continue;
        for (size_t i = nb - 1; i > 0 && best[i] < best[i - 1]; i--) {
            float t = best[i];
            best[i] = best[i - 1];
            best[i - 1] = t;
        }
    }
    if (index_kind != 2 && res->n_rows != nb)
        FAILF("search: %zu hits, model %zu", res->n_rows, nb);
    size_t good = 0;
    for (size_t i = 0; i < res->n_rows; i++) {
        int64_t k = ((const int64_t *)res->cols[0].data)[i];
        if (k < 0 || k >= KEYS || !model[k].live || (filtered && !match_filter(&model[k], kind, x)))
            FAILF("search hit %lld is not a live matching row", (long long)k);
        float d = l2(q, model[k].v);
        if (fabsf(d - res->distances[i]) > 1e-4f * (1.0f + d))
            FAILF("search hit %lld distance %g, true %g", (long long)k, (double)res->distances[i],
                  (double)d);
        if (i > 0 && res->distances[i] < res->distances[i - 1])
            FAILF("search hits not sorted at %zu", i);
        if (i < nb && d <= best[nb - 1] * (1.0f + 1e-5f) + 1e-6f)
            good++;
        if (index_kind != 2 && fabsf(d - best[i]) > 1e-4f * (1.0f + d))
            FAILF("search hit %zu at %g, exact %g (index %d)", i, (double)d, (double)best[i],
                  index_kind);
    }
    if (index_kind == 2 && nb > 0 && (double)good < 0.7 * (double)nb)
        FAILF("HNSW recall %zu/%zu", good, nb);
    sx_rowset_free(res);
    divergences_checked++;
}

static uint64_t cur_seed;

static void test_model(void)
{
    snprintf(base_dir, sizeof base_dir, "%s", test_tmpdir("model"));
    copy_gen = 0;
    snprintf(dir, sizeof dir, "%s/0", base_dir);
    fprintf(stderr, "seed: SX_SEED=%llu\n", (unsigned long long)cur_seed);
    rs = cur_seed | 1;
    divergences_checked = 0;
    const char *ev = getenv("SX_MODEL_STEPS");
    unsigned long steps = ev ? strtoul(ev, NULL, 10) : 4000;
    memset(model, 0, sizeof model);
    index_kind = 0;
    {
        sx_db_options o = { 0 };
        ASSERT_OK(sx_db_open(dir, &o, &db));
        sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                             { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                             { "a", SX_FIELD_INT64, false, false, 0, 0 },
                             { "b", SX_FIELD_DOUBLE, false, false, 0, 0 },
                             { "c", SX_FIELD_BOOL, false, false, 0, 0 },
                             { "s", SX_FIELD_VARCHAR, false, false, 0, 15 } };
        sx_collection_def d = { "m", f, 6, SX_METRIC_L2 };
        ASSERT_OK(sx_collection_create(db, &d));
        sx_db_close(db);
        db = NULL;
    }
    open_db();
    unsigned long counts[10] = { 0 };
    for (unsigned long step = 0; step < steps; step++) {
        unsigned r = (unsigned)(test_rand(&rs) % 1000);
        int op;
        if (r < 330)
            op = 0; /* insert */
        else if (r < 560)
            op = 1; /* upsert */
        else if (r < 600)
            op = 2; /* upsert with a repeated key in the batch */
        else if (r < 800)
            op = 3; /* delete keys */
        else if (r < 850)
            op = 4; /* delete where */
        else if (r < 930)
            op = 5; /* flush */
        else if (r < 960)
            op = 6; /* compact */
        else if (r < 980)
            op = 7; /* index create / drop */
        else if (r < 995)
            op = 8; /* restart */
        else
            op = 9; /* backup / restore */
        counts[op]++;
        size_t n = 1 + (size_t)(test_rand(&rs) % MAXB);
        switch (op) {
        case 0:
            op_write(false, n, false);
            break;
        case 1:
            op_write(true, n, false);
            break;
        case 2:
            op_write(true, n < 2 ? 2 : n, true);
            break;
        case 3:
            op_delete_keys(n);
            break;
        case 4:
            op_delete_where();
            break;
        case 5:
            ASSERT_OK(sx_flush(coll));
            break;
        case 6:
            ASSERT_OK(sx_compact(coll));
            break;
        case 7:
            op_index();
            break;
        case 8:
            op_restart(false);
            break;
        default:
            op_restart(true);
            break;
        }
        check();
    }
    close_db();
    fprintf(stderr,
            "model: %lu steps, %lu checks, 0 divergences; ops: insert %lu, upsert %lu, "
            "upsert-dup %lu, delete %lu, delete-where %lu, flush %lu, compact %lu, index %lu, "
            "restart %lu, backup-restore %lu\n",
            steps, divergences_checked, counts[0], counts[1], counts[2], counts[3], counts[4],
            counts[5], counts[6], counts[7], counts[8], counts[9]);
}

int main(void)
{
    const char *es = getenv("SX_SEED"), *en = getenv("SX_MODEL_SEEDS");
    uint64_t first = es ? strtoull(es, NULL, 10) : (uint64_t)time(NULL);
    unsigned long nseeds = en ? strtoul(en, NULL, 10) : 3;
    for (volatile unsigned long i = 0; i < nseeds; i++) { /* volatile: RUN longjmps */
        cur_seed = first + i;
        RUN(test_model);
    }
    return TEST_DONE();
}
