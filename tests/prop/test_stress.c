/*
 * test_stress.c: concurrent model-based stress test of the engine (issue 12). Several threads
 * run at once on one database:
 *   - WRITERS (W threads): each owns a disjoint key range in each of the long-lived collections
 *     and keeps a model of its keys; it inserts, upserts (new versions), deletes by key and by
 *     filter, and after each step reads its own keys back and checks them against its model:
 *     count under a range filter, get of a sample (present with the right version and vector,
 *     or absent), and a filtered top-k search compared with the model's brute force (exact
 *     while the collection has no index or FLAT; with HNSW / HNSW_SQ every hit must be a live row
 *     of the range at its true distance and recall@10 must stay >= 0.7). Only the owner writes a
 *     key, so each of these reads has one right answer whatever the other threads do.
 *   - CHAOS (1 thread): flush, compact, index create (FLAT, HNSW, HNSW_SQ) / drop, describe and
 *     sx_db_check (must always succeed) on random long-lived collections.
 *   - CHURN (1 thread): creates a scratch collection, fills it, indexes it, searches it and drops
 *     it, over and over, while
 *   - READERS (1 thread) list the collections, open them (a scratch one may vanish: SX_ENOTFOUND
 *     is the only acceptable failure), describe and search them.
 * At the end the database is closed and reopened and every writer's model is checked again in
 * full. Failures in a thread are recorded (first message wins), every thread stops, and the main
 * thread fails the test with the message and the seed.
 *
 * Run in the release, ASan+UBSan and TSan passes of `make test`; the lock-rank checker is active
 * in the two sanitizer builds. SX_STRESS_STEPS = steps per writer (default 1500), SX_SEED replays
 * the per-thread random streams (thread interleavings are not replayable; the seed still fixes
 * every thread's own choices).
 */
#include <math.h>
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>

#include "harness.h"

#define DIM     8
#define NCOLL   3
#define WRITERS 3
#define RANGE   600 /* keys per writer per collection */
#define MAXB    24
#define TOPK    10

typedef struct mrow {
    bool live;
    int64_t ver;
    float v[DIM];
} mrow;

typedef struct writer {
    int id;
    uint64_t rs;
    mrow model[NCOLL][RANGE];
    unsigned long steps, checks;
    pthread_t tid;
} writer;

static sx_db *db;
static char dir[512];
static atomic_bool stop_all;
static atomic_int failed;
static char fail_msg[1024];
static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
/* per long-lived collection: index kind (0 none, 1 FLAT, 2 approximate) and a generation that
 * is odd while the chaos thread changes the index */
static atomic_int idx_kind[NCOLL];
static atomic_uint idx_gen[NCOLL];
static atomic_ulong n_ops[8];
static writer writers[WRITERS];
static uint64_t base_seed;

#define TFAIL(...)                                   \
 do {                                                \
  pthread_mutex_lock(&fail_mu);                      \
  if (!atomic_exchange(&failed, 1))                  \
   snprintf(fail_msg, sizeof fail_msg, __VA_ARGS__); \
  pthread_mutex_unlock(&fail_mu);                    \
  atomic_store(&stop_all, true);                     \
  return;                                            \
 } while (0)

#define TCHECK_OK(expr, what)                                  \
 do {                                                          \
  sx_status _s = (expr);                                       \
  if (_s != SX_OK)                                             \
   TFAIL("%s: %s (%s)", what, sx_status_str(_s), sx_errmsg()); \
 } while (0)

static const char *coll_name(int c)
{
    static const char *const names[NCOLL] = { "s0", "s1", "s2" };
    return names[c];
}

static void create_schema(const char *name)
{
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 },
                         { "tag", SX_FIELD_INT64, false, false, 0, 0 } };
    sx_collection_def d = { name, f, 4, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
}

static void rand_vec(uint64_t *rs, float *v)
{
    for (int d = 0; d < DIM; d++)
        v[d] = test_randf(rs);
}

static float l2(const float *a, const float *b)
{
    float s = 0;
    for (int d = 0; d < DIM; d++)
        s += (a[d] - b[d]) * (a[d] - b[d]);
    return s;
}

/* ---------------------------------------------------------------- writers */

static int64_t key_of(const writer *w, size_t k)
{
    return (int64_t)(w->id * RANGE) + (int64_t)k;
}

/* Insert (upsert=false) or upsert n distinct keys of w's range; an insert picks absent keys. */
static void w_write(writer *w, sx_collection *c, int ci, bool upsert)
{
    size_t n = 1 + (size_t)(test_rand(&w->rs) % MAXB);
    int64_t ids[MAXB], vers[MAXB], tags[MAXB];
    float v[MAXB * DIM];
    size_t slot[MAXB], m = 0;
    for (size_t tries = 0; m < n && tries < 4 * MAXB; tries++) {
        size_t k = (size_t)(test_rand(&w->rs) % RANGE);
        if (!upsert && w->model[ci][k].live)
            continue;
        bool dup = false;
        for (size_t j = 0; j < m; j++)
            dup |= slot[j] == k;
        if (dup)
            continue;
        slot[m] = k;
        ids[m] = key_of(w, k);
        vers[m] = w->model[ci][k].ver + 1;
        tags[m] = (int64_t)(test_rand(&w->rs) % 4);
        rand_vec(&w->rs, v + m * DIM);
        m++;
    }
    if (m == 0)
        return;
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                         { "v", SX_FIELD_FLOAT_VECTOR, v },
                         { "ver", SX_FIELD_INT64, vers },
                         { "tag", SX_FIELD_INT64, tags } };
    sx_batch b = { m, cols, 4 };
    TCHECK_OK(upsert ? sx_upsert(c, &b) : sx_insert(c, &b, NULL), upsert ? "upsert" : "insert");
    for (size_t j = 0; j < m; j++) {
        mrow *r = &w->model[ci][slot[j]];
        r->live = true;
        r->ver = vers[j];
        memcpy(r->v, v + j * DIM, sizeof r->v);
    }
}

static void w_delete(writer *w, sx_collection *c, int ci)
{
    size_t n = 1 + (size_t)(test_rand(&w->rs) % MAXB);
    int64_t ids[MAXB];
    size_t want = 0;
    for (size_t i = 0; i < n; i++) {
        size_t k = (size_t)(test_rand(&w->rs) % RANGE);
        ids[i] = key_of(w, k);
        bool dup = false;
        for (size_t j = 0; j < i; j++)
            dup |= ids[j] == ids[i];
        if (!dup && w->model[ci][k].live)
            want++;
    }
    sx_keys keys = { n, ids, NULL };
    uint64_t got = 0;
    TCHECK_OK(sx_delete(c, &keys, &got), "delete");
    if (got != want)
        TFAIL("writer %d %s: delete of %zu keys removed %llu, model %zu", w->id, coll_name(ci), n,
              (unsigned long long)got, want);
    for (size_t i = 0; i < n; i++)
        w->model[ci][ids[i] - key_of(w, 0)].live = false;
}

/* Deletes the rows of a small sub-range [lo, lo + 40) of w's range: only w's keys match. */
static void w_delete_where(writer *w, sx_collection *c, int ci)
{
    size_t lo = (size_t)(test_rand(&w->rs) % (RANGE - 40));
    char f[128];
    snprintf(f, sizeof f, "id >= %lld and id < %lld", (long long)key_of(w, lo),
             (long long)key_of(w, lo + 40));
    size_t want = 0;
    for (size_t k = lo; k < lo + 40; k++)
        want += w->model[ci][k].live;
    uint64_t got = 0;
    TCHECK_OK(sx_delete_where(c, f, &got), "delete where");
    if (got != want)
        TFAIL("writer %d %s: delete where %s removed %llu, model %zu", w->id, coll_name(ci), f,
              (unsigned long long)got, want);
    for (size_t k = lo; k < lo + 40; k++)
        w->model[ci][k].live = false;
}

/* Reads w's keys back: range count, a get sample, a filtered search vs brute force. */
static void w_check(writer *w, sx_collection *c, int ci, bool full)
{
    char f[128];
    snprintf(f, sizeof f, "id >= %lld and id < %lld", (long long)key_of(w, 0),
             (long long)key_of(w, RANGE));
    uint64_t live = 0, n = 0;
    for (size_t k = 0; k < RANGE; k++)
        live += w->model[ci][k].live;
    TCHECK_OK(sx_count(c, f, &n), "count");
    if (n != live)
        TFAIL("writer %d %s: count(%s) = %llu, model %llu", w->id, coll_name(ci), f,
              (unsigned long long)n, (unsigned long long)live);

    size_t ns = full ? RANGE : 12;
    int64_t ids[RANGE];
    for (size_t i = 0; i < ns; i++)
        ids[i] = full ? key_of(w, i) : key_of(w, (size_t)(test_rand(&w->rs) % RANGE));
    sx_keys keys = { ns, ids, NULL };
    const char *out[] = { "ver", "v" };
    sx_rowset *rs = NULL;
    TCHECK_OK(sx_get(c, &keys, out, 2, &rs), "get");
    size_t r = 0;
    for (size_t i = 0; i < ns && !atomic_load(&failed); i++) {
        const mrow *m = &w->model[ci][ids[i] - key_of(w, 0)];
        if (!m->live)
            continue;
        const int64_t *gid = rs->cols[0].data;
        while (r < rs->n_rows && gid[r] != ids[i])
            r++;
        if (r >= rs->n_rows) {
            sx_rowset_free(rs);
            TFAIL("writer %d %s: get: key %lld (version %lld) missing", w->id, coll_name(ci),
                  (long long)ids[i], (long long)m->ver);
        }
        int64_t ver = ((const int64_t *)rs->cols[1].data)[r];
        const float *gv = (const float *)rs->cols[2].data + r * DIM;
        if (ver != m->ver || memcmp(gv, m->v, sizeof m->v) != 0) {
            sx_rowset_free(rs);
            TFAIL("writer %d %s: get: key %lld has version %lld, model %lld", w->id, coll_name(ci),
                  (long long)ids[i], (long long)ver, (long long)m->ver);
        }
        r++;
    }
    for (size_t i = 0; i < rs->n_rows; i++) {
        int64_t k = ((const int64_t *)rs->cols[0].data)[i];
        if (k < key_of(w, 0) || k >= key_of(w, RANGE) || !w->model[ci][k - key_of(w, 0)].live) {
            sx_rowset_free(rs);
            TFAIL("writer %d %s: get returned key %lld the model says is absent", w->id,
                  coll_name(ci), (long long)k);
        }
    }
    sx_rowset_free(rs);

    float q[DIM];
    rand_vec(&w->rs, q);
    unsigned g0 = atomic_load(&idx_gen[ci]);
    int kind0 = atomic_load(&idx_kind[ci]);
    sx_param ef[] = { { "ef", "200" } };
    sx_search_req req = {
        .queries = q, .nq = 1, .k = TOPK, .filter = f, .params = ef, .n_params = 1, .metric = -1
    };
    sx_rowset *res = NULL;
    TCHECK_OK(sx_search(c, &req, &res), "search");
    unsigned g1 = atomic_load(&idx_gen[ci]);
    bool exact = g0 == g1 && !(g0 & 1) && kind0 != 2;
    float best[TOPK];
    size_t nb = 0;
    for (size_t k = 0; k < RANGE; k++) {
        if (!w->model[ci][k].live)
            continue;
        float d = l2(q, w->model[ci][k].v);
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
    size_t good = 0;
    char msg[256] = "";
    for (size_t i = 0; i < res->n_rows && !msg[0]; i++) {
        int64_t k = ((const int64_t *)res->cols[0].data)[i];
        if (k < key_of(w, 0) || k >= key_of(w, RANGE) || !w->model[ci][k - key_of(w, 0)].live) {
            snprintf(msg, sizeof msg, "search hit %lld is not a live row of the range",
                     (long long)k);
            break;
        }
        float d = l2(q, w->model[ci][k - key_of(w, 0)].v);
        if (fabsf(d - res->distances[i]) > 1e-4f * (1.0f + d))
            snprintf(msg, sizeof msg, "search hit %lld at %g, true distance %g", (long long)k,
                     (double)res->distances[i], (double)d);
        else if (exact && i < nb && fabsf(d - best[i]) > 1e-4f * (1.0f + d))
            snprintf(msg, sizeof msg, "exact search hit %zu at %g, brute force %g", i, (double)d,
                     (double)best[i]);
        if (i < nb && d <= best[nb - 1] * (1.0f + 1e-5f) + 1e-6f)
            good++;
    }
    if (!msg[0] && exact && res->n_rows != nb)
        snprintf(msg, sizeof msg, "exact search returned %zu hits, model %zu", res->n_rows, nb);
    if (!msg[0] && nb > 0 && (double)good < 0.7 * (double)nb)
        snprintf(msg, sizeof msg, "recall %zu/%zu (index kind %d)", good, nb, kind0);
    sx_rowset_free(res);
    if (msg[0])
        TFAIL("writer %d %s: %s", w->id, coll_name(ci), msg);
    w->checks++;
}

static void *writer_main(void *arg)
{
    writer *w = arg;
    const char *ev = getenv("SX_STRESS_STEPS");
    unsigned long steps = ev ? strtoul(ev, NULL, 10) : 1500;
    sx_collection *cs[NCOLL];
    for (int ci = 0; ci < NCOLL; ci++)
        if (sx_collection_open(db, coll_name(ci), &cs[ci]) != SX_OK) {
            pthread_mutex_lock(&fail_mu);
            if (!atomic_exchange(&failed, 1))
                snprintf(fail_msg, sizeof fail_msg, "writer open: %s", sx_errmsg());
            pthread_mutex_unlock(&fail_mu);
            atomic_store(&stop_all, true);
            return NULL;
        }
    for (unsigned long s = 0; s < steps && !atomic_load(&stop_all); s++) {
        int ci = (int)(test_rand(&w->rs) % NCOLL);
        unsigned r = (unsigned)(test_rand(&w->rs) % 100);
        if (r < 40)
            w_write(w, cs[ci], ci, false);
        else if (r < 65)
            w_write(w, cs[ci], ci, true);
        else if (r < 85)
            w_delete(w, cs[ci], ci);
        else
            w_delete_where(w, cs[ci], ci);
        if (!atomic_load(&stop_all))
            w_check(w, cs[ci], ci, false);
        w->steps++;
    }
    for (int ci = 0; ci < NCOLL; ci++)
        sx_collection_release(cs[ci]);
    return NULL;
}

/* ---------------------------------------------------------------- chaos, churn, readers */

static atomic_int writers_left;

static void chaos_step(uint64_t *rs, sx_collection **cs)
{
    int ci = (int)(test_rand(rs) % NCOLL);
    sx_collection *c = cs[ci];
    unsigned r = (unsigned)(test_rand(rs) % 100);
    if (r < 30) {
        TCHECK_OK(sx_flush(c), "flush");
        atomic_fetch_add(&n_ops[0], 1);
    } else if (r < 45) {
        TCHECK_OK(sx_compact(c), "compact");
        atomic_fetch_add(&n_ops[1], 1);
    } else if (r < 65) {
        sx_index_info info;
        TCHECK_OK(sx_index_describe(c, &info), "index describe");
        atomic_fetch_add(&idx_gen[ci], 1); /* odd: changing */
        if (info.state == SX_INDEX_NONE) {
            unsigned t = (unsigned)(test_rand(rs) % 3);
            sx_param hp[] = { { "M", "8" }, { "efConstruction", "64" } };
            const char *type = t == 0 ? "FLAT" : t == 1 ? "HNSW" : "HNSW_SQ";
            atomic_store(&idx_kind[ci], t == 0 ? 1 : 2);
            TCHECK_OK(sx_index_create(c, type, t ? hp : NULL, t ? 2 : 0), "index create");
        } else {
            TCHECK_OK(sx_index_drop(c), "index drop");
            /* approximate until the drop is done; exact from then on */
            atomic_store(&idx_kind[ci], 0);
        }
        atomic_fetch_add(&idx_gen[ci], 1);
        atomic_fetch_add(&n_ops[2], 1);
    } else if (r < 80) {
        TCHECK_OK(sx_db_check(db), "db check");
        atomic_fetch_add(&n_ops[3], 1);
    } else {
        sx_collection_info ci_info;
        TCHECK_OK(sx_collection_describe(c, &ci_info), "describe");
        atomic_fetch_add(&n_ops[4], 1);
    }
}

static void *chaos_main(void *arg)
{
    uint64_t rs = *(uint64_t *)arg;
    sx_collection *cs[NCOLL];
    for (int ci = 0; ci < NCOLL; ci++)
        if (sx_collection_open(db, coll_name(ci), &cs[ci]) != SX_OK)
            return NULL;
    while (!atomic_load(&stop_all) && atomic_load(&writers_left) > 0)
        chaos_step(&rs, cs);
    for (int ci = 0; ci < NCOLL; ci++)
        sx_collection_release(cs[ci]);
    return NULL;
}

static void churn_step(uint64_t *rs, unsigned gen)
{
    char name[32];
    snprintf(name, sizeof name, "e%u", gen % 4);
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
                         { "ver", SX_FIELD_INT64, false, false, 0, 0 },
                         { "tag", SX_FIELD_INT64, false, false, 0, 0 } };
    sx_collection_def d = { name, f, 4, SX_METRIC_L2 };
    TCHECK_OK(sx_collection_create(db, &d), "scratch create");
    sx_collection *c = NULL;
    TCHECK_OK(sx_collection_open(db, name, &c), "scratch open");
    int64_t ids[200], vers[200], tags[200];
    float v[200 * DIM];
    for (int i = 0; i < 200; i++) {
        ids[i] = i;
        vers[i] = 1;
        tags[i] = i % 4;
        rand_vec(rs, v + i * DIM);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                         { "v", SX_FIELD_FLOAT_VECTOR, v },
                         { "ver", SX_FIELD_INT64, vers },
                         { "tag", SX_FIELD_INT64, tags } };
    sx_batch b = { 200, cols, 4 };
    sx_status st = sx_insert(c, &b, NULL);
    if (st == SX_OK && (test_rand(rs) & 1))
        st = sx_index_create(c, "HNSW", NULL, 0);
    if (st == SX_OK)
        st = sx_flush(c);
    if (st == SX_OK) {
        uint64_t n = 0;
        st = sx_count(c, NULL, &n);
        if (st == SX_OK && n != 200) {
            sx_collection_release(c);
            TFAIL("scratch %s: count %llu, want 200", name, (unsigned long long)n);
        }
    }
    sx_collection_release(c);
    if (st != SX_OK)
        TFAIL("scratch %s: %s (%s)", name, sx_status_str(st), sx_errmsg());
    TCHECK_OK(sx_collection_drop(db, name), "scratch drop");
    atomic_fetch_add(&n_ops[5], 1);
}

static void *churn_main(void *arg)
{
    uint64_t rs = *(uint64_t *)arg;
    for (unsigned gen = 0; !atomic_load(&stop_all) && atomic_load(&writers_left) > 0; gen++)
        churn_step(&rs, gen);
    return NULL;
}

static void reader_step(uint64_t *rs)
{
    char **names = NULL;
    size_t n = 0;
    TCHECK_OK(sx_collection_list(db, &names, &n), "list");
    for (size_t i = 0; i < n && !atomic_load(&stop_all); i++) {
        sx_collection *c = NULL;
        sx_status st = sx_collection_open(db, names[i], &c);
        if (st == SX_ENOTFOUND)
            continue; /* a scratch collection dropped since the list */
        if (st != SX_OK) {
            sx_strings_free(names, n);
            TFAIL("reader open %s: %s (%s)", names[i], sx_status_str(st), sx_errmsg());
        }
        float q[DIM];
        rand_vec(rs, q);
        sx_search_req req = { .queries = q, .nq = 1, .k = 5, .metric = -1 };
        sx_rowset *res = NULL;
        st = sx_search(c, &req, &res);
        if (st == SX_OK)
            sx_rowset_free(res);
        sx_collection_info info;
        sx_status dst = sx_collection_describe(c, &info);
        sx_collection_release(c);
        if ((st != SX_OK && st != SX_ENOTFOUND) || (dst != SX_OK && dst != SX_ENOTFOUND)) {
            sx_strings_free(names, n);
            TFAIL("reader %s: search %s, describe %s (%s)", names[i], sx_status_str(st),
                  sx_status_str(dst), sx_errmsg());
        }
    }
    sx_strings_free(names, n);
    atomic_fetch_add(&n_ops[6], 1);
}

static void *reader_main(void *arg)
{
    uint64_t rs = *(uint64_t *)arg;
    while (!atomic_load(&stop_all) && atomic_load(&writers_left) > 0) {
        reader_step(&rs);
        struct timespec ts = { 0, 500000L }; /* leave the CPUs to the writers */
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* ---------------------------------------------------------------- driver */

static void open_db(void)
{
    sx_db_options o = { 0 };
    o.segment_max_bytes = 300 * DIM * sizeof(float); /* seal often: many segments */
    o.build_threads = 2;
    o.search_threads = 2;
    ASSERT_OK(sx_db_open(dir, &o, &db));
}

static void *writer_wrap(void *arg)
{
    writer_main(arg);
    atomic_fetch_sub(&writers_left, 1);
    return NULL;
}

static void test_stress(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("stress"));
    base_seed = test_seed() | 1;
    atomic_store(&stop_all, false);
    atomic_store(&failed, 0);
    open_db();
    for (int ci = 0; ci < NCOLL; ci++)
        create_schema(coll_name(ci));
    memset(writers, 0, sizeof writers);
    atomic_store(&writers_left, WRITERS);
    for (int t = 0; t < WRITERS; t++) {
        writers[t].id = t;
        writers[t].rs = base_seed * 0x9E3779B97F4A7C15ull + (uint64_t)t * 7919u + 1;
        ASSERT(pthread_create(&writers[t].tid, NULL, writer_wrap, &writers[t]) == 0);
    }
    uint64_t seeds[3] = { base_seed ^ 0xC4A05u, base_seed ^ 0xC415u, base_seed ^ 0x4EADu };
    pthread_t chaos, churn, reader;
    ASSERT(pthread_create(&chaos, NULL, chaos_main, &seeds[0]) == 0);
    ASSERT(pthread_create(&churn, NULL, churn_main, &seeds[1]) == 0);
    ASSERT(pthread_create(&reader, NULL, reader_main, &seeds[2]) == 0);
    for (int t = 0; t < WRITERS; t++)
        pthread_join(writers[t].tid, NULL);
    pthread_join(chaos, NULL);
    pthread_join(churn, NULL);
    pthread_join(reader, NULL);
    if (atomic_load(&failed))
        FAILF("%s (replay the random choices with SX_SEED=%llu)", fail_msg,
              (unsigned long long)(base_seed & ~1ull));

    /* restart, then every writer's keys in full */
    sx_db_close(db);
    open_db();
    for (int t = 0; t < WRITERS; t++) {
        for (int ci = 0; ci < NCOLL; ci++) {
            sx_collection *c = NULL;
            ASSERT_OK(sx_collection_open(db, coll_name(ci), &c));
            sx_status ws = sx_index_wait(c, 120000); /* index files load or rebuild */
            if (ws != SX_OK && ws != SX_ENOTFOUND)
                FAILF("index wait after restart: %s (%s)", sx_status_str(ws), sx_errmsg());
            w_check(&writers[t], c, ci, true);
            sx_collection_release(c);
            if (atomic_load(&failed))
                FAILF("after restart: %s", fail_msg);
        }
    }
    ASSERT_OK(sx_db_check(db));
    sx_db_close(db);
    db = NULL;
    unsigned long steps = 0, checks = 0;
    for (int t = 0; t < WRITERS; t++) {
        steps += writers[t].steps;
        checks += writers[t].checks;
    }
    fprintf(stderr,
            "stress: %d writers, %lu steps, %lu checked reads; chaos: %lu flush, %lu compact, "
            "%lu index create/drop, %lu db check, %lu describe; churn: %lu create-fill-drop "
            "cycles; reader: %lu passes\n",
            WRITERS, steps, checks, atomic_load(&n_ops[0]), atomic_load(&n_ops[1]),
            atomic_load(&n_ops[2]), atomic_load(&n_ops[3]), atomic_load(&n_ops[4]),
            atomic_load(&n_ops[5]), atomic_load(&n_ops[6]));
}

int main(void)
{
    RUN(test_stress);
    return TEST_DONE();
}
