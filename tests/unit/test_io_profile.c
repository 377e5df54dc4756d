/*
 * test_io_profile.c: the I/O profile (sx_io_profile_get / sx_io_phase_set, src/platform/fs.c).
 *
 *  - size buckets: an operation of exactly 4096 bytes lands in bucket 0, 4097 in bucket 1,
 *    4 MiB in bucket 10, 4 MiB + 1 and 1 TiB in the last; DISKANN-style batched notes
 *    (sx__io_note_read(count, bytes)) count `count` operations of bytes/count each;
 *  - backends: sx__io_record(OBJSTORE) lands in the object-store column of the caller's phase and
 *    not in sx_io_stats; sx__io_record(LOCAL) lands in the local column and in sx_io_stats;
 *  - sx_io_phase_set returns the previous phase, clamps out-of-range values to OTHER, and is
 *    per thread (another thread starts in OTHER);
 *  - engine attribution, with the caller's own thread in a different phase each time so a
 *    missing tag shows: inserts (with the flushes a full growing segment triggers), sx_flush,
 *    deletes and delete-by-filter write as INSERT; the background DISKANN build writes as BUILD;
 *    searches (single queries on the caller's thread and a batch on the engine's search workers)
 *    read DISKANN sectors as QUERY; the caller's phase is restored after every call; nothing
 *    leaks into OTHER;
 *  - the local column summed over phases equals the sx_io_stats deltas, and every cell's
 *    histogram sums to its operation count;
 *  - /metrics (sx__metrics_render): the profile's counters and the op-size histogram with
 *    cumulative buckets, +Inf == _count, _sum == bytes (promtool itself runs in
 *    tests/e2e/test_server_http.c).
 */
#include <pthread.h>
#include <sextant.h>

#include "harness.h"
#include "platform/fs.h"
#include "server/server.h"
#include "util/alloc.h"

#define DIM   16
#define LOCAL SX__IO_LOCAL
#define OBJ   SX__IO_OBJSTORE

static sx_io_counter cell_delta(const sx_io_profile *a, const sx_io_profile *b, int ph, int be)
{
    sx_io_counter d;
    const sx_io_counter *x = &b->c[ph][be], *y = &a->c[ph][be];
    d.read_ops = x->read_ops - y->read_ops;
    d.read_bytes = x->read_bytes - y->read_bytes;
    d.write_ops = x->write_ops - y->write_ops;
    d.write_bytes = x->write_bytes - y->write_bytes;
    for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++) {
        d.read_hist[i] = x->read_hist[i] - y->read_hist[i];
        d.write_hist[i] = x->write_hist[i] - y->write_hist[i];
    }
    return d;
}

static bool cell_zero(const sx_io_counter *d)
{
    return d->read_ops == 0 && d->read_bytes == 0 && d->write_ops == 0 && d->write_bytes == 0;
}

static void check_hist_sums(const sx_io_profile *p)
{
    for (int ph = 0; ph < SX_IO_PHASES; ph++)
        for (int be = 0; be < SX_IO_BACKENDS; be++) {
            uint64_t r = 0, w = 0;
            for (int i = 0; i < SX_IO_SIZE_BUCKETS; i++) {
                r += p->c[ph][be].read_hist[i];
                w += p->c[ph][be].write_hist[i];
            }
            ASSERT_EQ(r, p->c[ph][be].read_ops);
            ASSERT_EQ(w, p->c[ph][be].write_ops);
        }
}

static void test_buckets_and_backends(void)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx_io_profile a, b;
    sx_io_stats sa, sb;
    sx_io_profile_get(&a);
    sx_io_stats_get(&sa);
    sx__io_record(OBJ, false, 4096);
    sx__io_record(OBJ, false, 4097);
    sx__io_record(OBJ, false, (uint64_t)4 << 20);
    sx__io_record(OBJ, true, ((uint64_t)4 << 20) + 1);
    sx__io_record(OBJ, true, (uint64_t)1 << 40);
    sx__io_record(OBJ, true, 1);
    sx_io_profile_get(&b);
    sx_io_stats_get(&sb);
    sx_io_counter d = cell_delta(&a, &b, SX_IO_PHASE_QUERY, OBJ);
    ASSERT_EQ(d.read_ops, 3);
    ASSERT_EQ(d.read_bytes, 4096 + 4097 + (4 << 20));
    ASSERT_EQ(d.read_hist[0], 1);
    ASSERT_EQ(d.read_hist[1], 1);
    ASSERT_EQ(d.read_hist[10], 1);
    ASSERT_EQ(d.read_hist[11], 0);
    ASSERT_EQ(d.write_ops, 3);
    ASSERT_EQ(d.write_bytes, (4 << 20) + 1 + ((uint64_t)1 << 40) + 1);
    ASSERT_EQ(d.write_hist[0], 1);
    ASSERT_EQ(d.write_hist[10], 0);
    ASSERT_EQ(d.write_hist[SX_IO_SIZE_BUCKETS - 1], 2);
    /* object-store requests are not local file I/O */
    ASSERT_EQ(sb.read_ops, sa.read_ops);
    ASSERT_EQ(sb.write_ops, sa.write_ops);
    ASSERT_EQ(sb.read_bytes, sa.read_bytes);
    for (int ph = 0; ph < SX_IO_PHASES; ph++) {
        sx_io_counter l = cell_delta(&a, &b, ph, LOCAL);
        ASSERT(cell_zero(&l));
        if (ph != SX_IO_PHASE_QUERY) {
            sx_io_counter o = cell_delta(&a, &b, ph, OBJ);
            ASSERT(cell_zero(&o));
        }
    }

    /* local: sx__io_record(LOCAL) and a DISKANN-style batch of 8 sector reads of 4 KiB */
    sx_io_phase_set(SX_IO_PHASE_BUILD);
    sx_io_profile_get(&a);
    sx_io_stats_get(&sa);
    sx__io_record(LOCAL, true, 8192);
    sx__io_note_read(8, 8 * 4096);
    sx__io_note_read(2, 2 * 8192);
    sx_io_profile_get(&b);
    sx_io_stats_get(&sb);
    d = cell_delta(&a, &b, SX_IO_PHASE_BUILD, LOCAL);
    ASSERT_EQ(d.write_ops, 1);
    ASSERT_EQ(d.write_bytes, 8192);
    ASSERT_EQ(d.write_hist[1], 1);
    ASSERT_EQ(d.read_ops, 10);
    ASSERT_EQ(d.read_bytes, 8 * 4096 + 2 * 8192);
    ASSERT_EQ(d.read_hist[0], 8);
    ASSERT_EQ(d.read_hist[1], 2);
    ASSERT_EQ(sb.write_ops - sa.write_ops, 1);
    ASSERT_EQ(sb.write_bytes - sa.write_bytes, 8192);
    ASSERT_EQ(sb.read_ops - sa.read_ops, 10);
    ASSERT_EQ(sb.read_bytes - sa.read_bytes, 8 * 4096 + 2 * 8192);
    check_hist_sums(&b);
    sx_io_phase_set(prev);
}

static void *other_thread(void *arg)
{
    sx_io_phase *seen = arg;
    *seen = sx_io_phase_set(SX_IO_PHASE_OTHER);
    return NULL;
}

static void test_phase_set(void)
{
    sx_io_phase_set(SX_IO_PHASE_OTHER);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_INSERT), SX_IO_PHASE_OTHER);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_QUERY), SX_IO_PHASE_INSERT);
    /* another thread has its own phase, starting in OTHER */
    pthread_t t;
    sx_io_phase seen = SX_IO_PHASE_BUILD;
    ASSERT_EQ(pthread_create(&t, NULL, other_thread, &seen), 0);
    ASSERT_EQ(pthread_join(t, NULL), 0);
    ASSERT_EQ(seen, SX_IO_PHASE_OTHER);
    ASSERT_EQ(sx_io_phase_set((sx_io_phase)99), SX_IO_PHASE_QUERY);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_OTHER), SX_IO_PHASE_OTHER); /* 99 was clamped */
}

static sx_status insert_rows(sx_collection *c, int64_t start, size_t n)
{
    int64_t *ids = malloc(n * sizeof *ids);
    float *v = malloc(n * DIM * sizeof *v);
    uint64_t s = 12345 ^ (uint64_t)start;
    for (size_t i = 0; i < n; i++) {
        ids[i] = start + (int64_t)i;
        for (int d = 0; d < DIM; d++)
            v[i * DIM + d] = test_randf(&s);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "vec", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { n, cols, 2 };
    sx_status st = sx_insert(c, &b, NULL);
    free(ids);
    free(v);
    return st;
}

/* Profile + stats snapshot, taken while no engine thread does I/O. */
typedef struct snap {
    sx_io_profile p;
    sx_io_stats s;
} snap;

static void take(snap *x)
{
    sx_io_profile_get(&x->p);
    sx_io_stats_get(&x->s);
}

/* The local column summed over phases moved exactly as sx_io_stats did. */
static void check_local_matches_stats(const snap *a, const snap *b)
{
    uint64_t ro = 0, rb = 0, wo = 0, wb = 0;
    for (int ph = 0; ph < SX_IO_PHASES; ph++) {
        sx_io_counter d = cell_delta(&a->p, &b->p, ph, LOCAL);
        ro += d.read_ops;
        rb += d.read_bytes;
        wo += d.write_ops;
        wb += d.write_bytes;
    }
    ASSERT_EQ(ro, b->s.read_ops - a->s.read_ops);
    ASSERT_EQ(rb, b->s.read_bytes - a->s.read_bytes);
    ASSERT_EQ(wo, b->s.write_ops - a->s.write_ops);
    ASSERT_EQ(wb, b->s.write_bytes - a->s.write_bytes);
}

static void test_engine_phases(void)
{
    const char *dir = test_tmpdir("io_profile");
    sx_db *db = NULL;
    sx_db_options o = { 0 };
    o.segment_max_bytes = 1000 * DIM * sizeof(float); /* a full segment every 1000 rows */
    o.build_threads = 2;
    o.search_threads = 2;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = {
        { "id", SX_FIELD_INT64, true, false, 0, 0 },
        { "vec", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 },
    };
    sx_collection_def def = { "c", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &def));
    sx_collection *c = NULL;
    ASSERT_OK(sx_collection_open(db, "c", &c));
    snap s0, s1, s2, s3, s4, s5;

    /* 1. inserts with the caller in QUERY: INSERT writes the WAL and, as the growing segment
     * fills (1000 rows), the sealed segments; the caller's phase comes back */
    sx_io_phase_set(SX_IO_PHASE_QUERY);
    take(&s0);
    for (int i = 0; i < 3; i++)
        ASSERT_OK(insert_rows(c, i * 1000, 1000));
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_QUERY), SX_IO_PHASE_QUERY);
    take(&s1);
    sx_io_counter ins = cell_delta(&s0.p, &s1.p, SX_IO_PHASE_INSERT, LOCAL);
    uint64_t vec_bytes = 1000 * DIM * sizeof(float);
    fprintf(stderr, "insert: %" PRIu64 " writes, %" PRIu64 " bytes\n", ins.write_ops,
            ins.write_bytes);
    ASSERT(ins.write_ops >= 3);
    /* the WAL holds 3000 rows' vectors, at least two sealed segments 2000 more */
    ASSERT(ins.write_bytes >= 5 * vec_bytes);
    for (int ph = 0; ph < SX_IO_PHASES; ph++) {
        if (ph == SX_IO_PHASE_INSERT)
            continue;
        sx_io_counter d = cell_delta(&s0.p, &s1.p, ph, LOCAL);
        ASSERT(cell_zero(&d));
    }
    check_local_matches_stats(&s0, &s1);

    /* 2. an explicit flush, caller in OTHER: INSERT */
    ASSERT_OK(insert_rows(c, 3000, 500));
    sx_io_phase_set(SX_IO_PHASE_OTHER);
    take(&s1);
    ASSERT_OK(sx_flush(c));
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_OTHER), SX_IO_PHASE_OTHER);
    take(&s2);
    sx_io_counter fl = cell_delta(&s1.p, &s2.p, SX_IO_PHASE_INSERT, LOCAL);
    sx_io_counter fo = cell_delta(&s1.p, &s2.p, SX_IO_PHASE_OTHER, LOCAL);
    fprintf(stderr,
            "flush: INSERT %" PRIu64 " writes %" PRIu64 " bytes, OTHER %" PRIu64 " writes\n",
            fl.write_ops, fl.write_bytes, fo.write_ops);
    ASSERT(fl.write_bytes >= vec_bytes / 2); /* the 500-row segment */
    ASSERT(cell_zero(&fo));

    /* 3. a DISKANN build on the builder thread: BUILD writes the index files */
    sx_io_phase_set(SX_IO_PHASE_QUERY);
    take(&s2);
    ASSERT_OK(sx_index_create(c, "DISKANN", NULL, 0));
    ASSERT_OK(sx_index_wait(c, 120000));
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT_EQ(ii.state, SX_INDEX_FINISHED);
    ASSERT_EQ(ii.indexed_rows, 3500);
    take(&s3);
    sx_io_counter bd = cell_delta(&s2.p, &s3.p, SX_IO_PHASE_BUILD, LOCAL);
    fprintf(stderr, "build: %" PRIu64 " writes, %" PRIu64 " bytes; %" PRIu64 " reads\n",
            bd.write_ops, bd.write_bytes, bd.read_ops);
    ASSERT(bd.write_ops >= 4);                            /* one index per sealed segment */
    ASSERT(bd.write_bytes >= 3500 * DIM * sizeof(float)); /* DISKANN sectors hold the vectors */
    sx_io_counter bq = cell_delta(&s2.p, &s3.p, SX_IO_PHASE_QUERY, LOCAL);
    ASSERT(cell_zero(&bq)); /* the caller's QUERY saw nothing: builds are not its I/O */
    check_local_matches_stats(&s2, &s3);

    /* 4. searches, caller in BUILD: DISKANN sector reads are QUERY, on this thread (nq = 1)
     * and on the engine's search workers (nq = 32, search_threads = 2) */
    sx_io_phase_set(SX_IO_PHASE_BUILD);
    take(&s3);
    float q[32 * DIM];
    uint64_t rs = 777;
    for (size_t i = 0; i < 32 * DIM; i++)
        q[i] = test_randf(&rs);
    for (int i = 0; i < 5; i++) {
        sx_search_req req = { .queries = q + i * DIM, .nq = 1, .k = 10, .metric = -1 };
        sx_rowset *r = NULL;
        ASSERT_OK(sx_search(c, &req, &r));
        ASSERT_EQ(r->topks[0], 10);
        sx_rowset_free(r);
    }
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_BUILD), SX_IO_PHASE_BUILD);
    take(&s4);
    sx_io_counter q1 = cell_delta(&s3.p, &s4.p, SX_IO_PHASE_QUERY, LOCAL);
    fprintf(stderr, "search nq=1 x5: %" PRIu64 " reads, %" PRIu64 " bytes\n", q1.read_ops,
            q1.read_bytes);
    ASSERT(q1.read_ops >= 5);
    ASSERT_EQ(q1.write_ops, 0);
    ASSERT_EQ(q1.read_bytes % 4096, 0); /* whole sectors */
    ASSERT(q1.read_hist[0] + q1.read_hist[1] + q1.read_hist[2] == q1.read_ops);
    for (int ph = 0; ph < SX_IO_PHASES; ph++) {
        if (ph == SX_IO_PHASE_QUERY)
            continue;
        sx_io_counter d = cell_delta(&s3.p, &s4.p, ph, LOCAL);
        ASSERT(cell_zero(&d));
    }
    sx_search_req breq = { .queries = q, .nq = 32, .k = 10, .metric = -1 };
    sx_rowset *r = NULL;
    ASSERT_OK(sx_search(c, &breq, &r));
    ASSERT_EQ(r->nq, 32);
    sx_rowset_free(r);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_BUILD), SX_IO_PHASE_BUILD);
    take(&s5);
    sx_io_counter q32 = cell_delta(&s4.p, &s5.p, SX_IO_PHASE_QUERY, LOCAL);
    fprintf(stderr, "search nq=32: %" PRIu64 " reads\n", q32.read_ops);
    ASSERT(q32.read_ops >= 32);
    sx_io_counter qo = cell_delta(&s4.p, &s5.p, SX_IO_PHASE_OTHER, LOCAL);
    sx_io_counter qb = cell_delta(&s4.p, &s5.p, SX_IO_PHASE_BUILD, LOCAL);
    ASSERT(cell_zero(&qo)); /* the worker threads were tagged */
    ASSERT(cell_zero(&qb));
    check_local_matches_stats(&s3, &s5);

    /* 5. deletes and get/count/query, caller in OTHER */
    sx_io_phase_set(SX_IO_PHASE_OTHER);
    take(&s4);
    int64_t del[3] = { 1, 2, 3 };
    sx_keys k = { 3, del, NULL };
    uint64_t n = 0;
    ASSERT_OK(sx_delete(c, &k, &n));
    ASSERT_EQ(n, 3);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_OTHER), SX_IO_PHASE_OTHER);
    ASSERT_OK(sx_delete_where(c, "id >= 10 and id < 20", &n));
    ASSERT_EQ(n, 10);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_OTHER), SX_IO_PHASE_OTHER);
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, 3500 - 13);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_OTHER), SX_IO_PHASE_OTHER);
    int64_t gk[1] = { 100 };
    sx_keys g = { 1, gk, NULL };
    ASSERT_OK(sx_get(c, &g, NULL, 0, &r));
    ASSERT_EQ(r->n_rows, 1);
    sx_rowset_free(r);
    ASSERT_EQ(sx_io_phase_set(SX_IO_PHASE_OTHER), SX_IO_PHASE_OTHER);
    ASSERT_OK(sx_query(c, "id < 5", NULL, 0, 0, 0, &r));
    ASSERT_EQ(r->n_rows, 2); /* ids 0 and 4: 1, 2, 3 are deleted */
    sx_rowset_free(r);
    take(&s5);
    sx_io_counter dl = cell_delta(&s4.p, &s5.p, SX_IO_PHASE_INSERT, LOCAL);
    ASSERT(dl.write_ops >= 2); /* two WAL records */
    sx_io_counter dot = cell_delta(&s4.p, &s5.p, SX_IO_PHASE_OTHER, LOCAL);
    ASSERT(cell_zero(&dot));
    check_local_matches_stats(&s4, &s5);
    check_hist_sums(&s5.p);

    sx_collection_release(c);
    sx_db_close(db);
    sx_io_phase_set(SX_IO_PHASE_OTHER);
}

/* The value of the sample whose line starts with `prefix` (series name and labels, then ' '). */
static unsigned long long sample(const char *text, const char *prefix)
{
    size_t n = strlen(prefix);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, prefix, n) == 0 && p[n] == ' ')
            return strtoull(p + n + 1, NULL, 10);
    }
    FAILF("no sample %s in the exposition", prefix);
}

static void test_metrics_exposition(void)
{
    sx_io_phase prev = sx_io_phase_set(SX_IO_PHASE_QUERY);
    sx__io_record(OBJ, false, 100);
    sx__io_record(OBJ, false, 5000);
    sx__io_record(OBJ, false, (uint64_t)64 << 20);
    sx_io_phase_set(prev);
    sx_io_profile p;
    sx_io_profile_get(&p);
    const sx_io_counter *c = &p.c[SX_IO_PHASE_QUERY][OBJ];
    sx__metrics *m = NULL;
    ASSERT_OK(sx__metrics_new(&m));
    char *text = NULL;
    size_t len = 0;
    ASSERT_OK(sx__metrics_render(m, NULL, NULL, &text, &len));
    const char *lab = "{phase=\"query\",backend=\"s3\",dir=\"read\"";
    char key[256];
    snprintf(key, sizeof key, "sextant_io_profile_ops_total%s}", lab);
    ASSERT_EQ(sample(text, key), c->read_ops);
    ASSERT(c->read_ops >= 3);
    snprintf(key, sizeof key, "sextant_io_profile_bytes_total%s}", lab);
    ASSERT_EQ(sample(text, key), c->read_bytes);
    snprintf(key, sizeof key, "sextant_io_profile_op_size_bytes_bucket%s,le=\"4096\"}", lab);
    ASSERT_EQ(sample(text, key), c->read_hist[0]);
    snprintf(key, sizeof key, "sextant_io_profile_op_size_bytes_bucket%s,le=\"8192\"}", lab);
    ASSERT_EQ(sample(text, key), c->read_hist[0] + c->read_hist[1]);
    snprintf(key, sizeof key, "sextant_io_profile_op_size_bytes_bucket%s,le=\"4194304\"}", lab);
    ASSERT_EQ(sample(text, key), c->read_ops - c->read_hist[SX_IO_SIZE_BUCKETS - 1]);
    snprintf(key, sizeof key, "sextant_io_profile_op_size_bytes_bucket%s,le=\"+Inf\"}", lab);
    ASSERT_EQ(sample(text, key), c->read_ops);
    snprintf(key, sizeof key, "sextant_io_profile_op_size_bytes_count%s}", lab);
    ASSERT_EQ(sample(text, key), c->read_ops);
    snprintf(key, sizeof key, "sextant_io_profile_op_size_bytes_sum%s}", lab);
    ASSERT_EQ(sample(text, key), c->read_bytes);
    ASSERT(strstr(text, "# TYPE sextant_io_profile_op_size_bytes histogram\n") != NULL);
    /* every phase x backend x direction is present from the start */
    ASSERT(strstr(text, "sextant_io_profile_ops_total{phase=\"other\",backend=\"local\","
                        "dir=\"write\"} ") != NULL);
    ASSERT(strstr(text, "sextant_io_profile_ops_total{phase=\"build\",backend=\"s3\","
                        "dir=\"write\"} ") != NULL);
    sx__free(text);
    sx__metrics_free(m);
}

int main(void)
{
    RUN(test_buckets_and_backends);
    RUN(test_phase_set);
    RUN(test_engine_phases);
    RUN(test_metrics_exposition);
    return TEST_DONE();
}
