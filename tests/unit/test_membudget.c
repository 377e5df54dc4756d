/*
 * test_membudget.c: the memory budget (src/platform/membudget.c, sx_db_options.memory_limit_bytes,
 * docs/internals/MEMORY.md).
 *   - accounting: take / force / give per kind, avail, peak, a refusal is SX_ENOMEM whose message
 *     names the request, the budget, its source and what holds it; a give larger than the
 *     charges saturates at 0; NULL and unlimited budgets;
 *   - concurrency: threads taking 1 KiB at a time until refused never overshoot the limit
 *     (the CAS loop) and together hold exactly the limit;
 *   - the cgroup probe on fake trees (the root argument, as $SX_CGROUP_ROOT): v2 memory.max with
 *     a parent's limit binding below the child's "max", a container whose mount root is its own
 *     cgroup, v1 memory.limit_in_bytes with v1's "unlimited" page-counter maximum, no cgroup
 *     files at all; the default budget's headroom;
 *   - the engine: a database opened under a fake 256 MiB cgroup takes its default budget from
 *     it; a small budget seals the growing segment early (rows all searchable, refusals
 *     counted) and refuses a batch larger than the whole budget with SX_ENOMEM naming it;
 *     growing charges go back when a flush seals them; an index in RAM is charged; a search
 *     whose scratch (candidate lists of 2,048 queries at k = 16,384) exceeds the budget is
 *     refused naming it, and no scratch stays charged after a search; a DISKANN index without a
 *     node cache of its own gets one from a limited budget (same answers, fewer slot reads);
 *   - the allocation fault hook: every allocation of insert + flush + index build + search +
 *     drop failing in turn (sx__alloc_fail_after), then close: a budget shared with the database
 *     (sx_memory_budget) must be back at 0 bytes each time, so no error path keeps a charge.
 */
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "engine/engine.h" /* db->budget: a holder taking the budget */
#include "harness.h"
#include "platform/membudget.h"
#include "util/alloc.h"
#include "util/err.h"

#define MiB (1024ull * 1024ull)

/* ---------------------------------------------------------------- accounting */

static void test_accounting(void)
{
    sx__membudget *b = NULL;
    ASSERT_OK(sx__membudget_new(10 * MiB, "test budget", &b));
    ASSERT_EQ(sx__mem_limit(b), 10 * MiB);
    ASSERT_EQ(sx__mem_avail(b), 10 * MiB);
    ASSERT_OK(sx__mem_take(b, SX__MEM_GROWING, 4 * MiB, "rows"));
    ASSERT_OK(sx__mem_take(b, SX__MEM_INDEX, 5 * MiB, "an index"));
    ASSERT_EQ(sx__mem_used(b), 9 * MiB);
    ASSERT_EQ(sx__mem_avail(b), 1 * MiB);
    ASSERT_EQ(sx__mem_used_kind(b, SX__MEM_GROWING), 4 * MiB);

    /* over the limit: refused, nothing charged, the message says who and why */
    ASSERT_STATUS(sx__mem_take(b, SX__MEM_CACHE, 2 * MiB, "the widget"), SX_ENOMEM);
    const char *msg = sx_errmsg();
    ASSERT(strstr(msg, "the widget") != NULL);
    ASSERT(strstr(msg, "test budget") != NULL);
    ASSERT(strstr(msg, "index") != NULL && strstr(msg, "growing") != NULL);
    ASSERT_EQ(sx__mem_used(b), 9 * MiB);
    ASSERT_EQ(sx__mem_used_kind(b, SX__MEM_CACHE), 0);

    /* exactly the rest fits */
    ASSERT_OK(sx__mem_take(b, SX__MEM_CACHE, 1 * MiB, "the rest"));
    ASSERT_EQ(sx__mem_avail(b), 0);
    /* force goes over and counts; then takes are refused, even of 1 byte */
    sx__mem_force(b, SX__MEM_SEALED, 3 * MiB);
    ASSERT_EQ(sx__mem_used(b), 13 * MiB);
    ASSERT_EQ(sx__mem_avail(b), 0);
    ASSERT_STATUS(sx__mem_take(b, SX__MEM_SCRATCH, 1, "one byte"), SX_ENOMEM);

    sx_memory_stats st;
    sx__mem_stats(b, &st);
    ASSERT_EQ(st.limit_bytes, 10 * MiB);
    ASSERT_EQ(st.used_bytes, 13 * MiB);
    ASSERT_EQ(st.peak_bytes, 13 * MiB);
    ASSERT_EQ(st.sealed_bytes, 3 * MiB);
    ASSERT_EQ(st.cache_bytes, 1 * MiB);
    ASSERT_EQ(st.refusals, 2);
    ASSERT(strcmp(st.source, "test budget") == 0);
    char d[256];
    sx__mem_describe(b, d, sizeof d);
    ASSERT(strncmp(d, "index 5.0 MiB", 13) == 0); /* largest first */

    sx__mem_give(b, SX__MEM_SEALED, 3 * MiB);
    sx__mem_give(b, SX__MEM_INDEX, 5 * MiB);
    sx__mem_give(b, SX__MEM_GROWING, 4 * MiB);
    sx__mem_give(b, SX__MEM_CACHE, 1 * MiB);
    ASSERT_EQ(sx__mem_used(b), 0);
    sx__mem_stats(b, &st);
    ASSERT_EQ(st.peak_bytes, 13 * MiB); /* the peak stays */
    /* a give past the charges saturates (a bug elsewhere must not read as "all used") */
    sx__mem_give(b, SX__MEM_CACHE, 1 * MiB);
    ASSERT_EQ(sx__mem_used(b), 0);
    ASSERT_EQ(sx__mem_avail(b), 10 * MiB);
    sx__membudget_free(b);

    /* unlimited counts but never refuses; NULL does nothing */
    ASSERT_OK(sx__membudget_new(0, "unlimited", &b));
    ASSERT_EQ(sx__mem_avail(b), UINT64_MAX);
    ASSERT_OK(sx__mem_take(b, SX__MEM_BUILD, 1ull << 50, "huge"));
    ASSERT_EQ(sx__mem_used(b), 1ull << 50);
    sx__membudget_free(b);
    ASSERT_OK(sx__mem_take(NULL, SX__MEM_BUILD, 1ull << 50, "null"));
    sx__mem_give(NULL, SX__MEM_BUILD, 1);
    ASSERT_EQ(sx__mem_avail(NULL), UINT64_MAX);
}

/* ---------------------------------------------------------------- concurrency */

typedef struct taker {
    sx__membudget *b;
    uint64_t got;
} taker;

static void *take_loop(void *arg)
{
    taker *t = arg;
    while (sx__mem_take(t->b, SX__MEM_SCRATCH, 1024, "a taker") == SX_OK)
        t->got += 1024;
    return NULL;
}

static void test_concurrent_takes(void)
{
    enum { T = 4 };

    const uint64_t limit = 8 * MiB; /* a multiple of 1 KiB: the takers must fill it exactly */
    sx__membudget *b = NULL;
    ASSERT_OK(sx__membudget_new(limit, "concurrent", &b));
    pthread_t th[T];
    taker tk[T];
    for (int i = 0; i < T; i++) {
        tk[i] = (taker){ b, 0 };
        ASSERT(pthread_create(&th[i], NULL, take_loop, &tk[i]) == 0);
    }
    uint64_t sum = 0;
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        sum += tk[i].got;
    }
    ASSERT_EQ(sum, limit);
    ASSERT_EQ(sx__mem_used(b), limit);
    sx_memory_stats st;
    sx__mem_stats(b, &st);
    ASSERT_EQ(st.peak_bytes, limit); /* never above, even for a moment */
    ASSERT_EQ(st.refusals, T);
    sx__membudget_free(b);
}

/* ---------------------------------------------------------------- the cgroup probe */

static char g_dir[600];

static void put_file(const char *root, const char *rel, const char *text)
{
    char path[1400], cmd[1500];
    snprintf(path, sizeof path, "%s/%s", root, rel);
    snprintf(cmd, sizeof cmd, "mkdir -p \"$(dirname '%s')\"", path);
    ASSERT(system(cmd) == 0);
    FILE *f = fopen(path, "w");
    ASSERT(f != NULL);
    ASSERT(fputs(text, f) >= 0);
    ASSERT(fclose(f) == 0);
}

static const char *fake_root(const char *tag)
{
    static char root[800];
    snprintf(root, sizeof root, "%s/%s", g_dir, tag);
    char cmd[900];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, root);
    ASSERT(system(cmd) == 0);
    return root;
}

static void test_cgroup_probe(void)
{
    uint64_t lim = 1;
    char src[256];

    /* v2: the process in /app/worker ("max"), its parent /app limited to 1 GiB: the parent binds */
    const char *r = fake_root("v2");
    put_file(r, "proc/self/mountinfo",
             "22 1 0:21 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:9 - cgroup2 "
             "cgroup2 rw,nsdelegate,memory_recursiveprot\n"
             "23 1 8:1 / / rw,relatime - ext4 /dev/sda1 rw\n");
    put_file(r, "proc/self/cgroup", "0::/app/worker\n");
    put_file(r, "sys/fs/cgroup/app/worker/memory.max", "max\n");
    put_file(r, "sys/fs/cgroup/app/memory.max", "1073741824\n");
    put_file(r, "sys/fs/cgroup/memory.max", "max\n");
    sx__cgroup_memory_limit(r, &lim, src, sizeof src);
    ASSERT_EQ(lim, 1073741824ull);
    ASSERT(strstr(src, "cgroup v2") != NULL);
    ASSERT(strstr(src, "/sys/fs/cgroup/app/memory.max") != NULL);
    /* the child's own tighter limit wins */
    put_file(r, "sys/fs/cgroup/app/worker/memory.max", "268435456\n");
    sx__cgroup_memory_limit(r, &lim, src, sizeof src);
    ASSERT_EQ(lim, 268435456ull);
    ASSERT(strstr(src, "/app/worker/memory.max") != NULL);

    /* a container: the mount's root is the container's cgroup, /proc/self/cgroup the full path */
    r = fake_root("v2c");
    put_file(r, "proc/self/mountinfo",
             "30 29 0:26 /kubepods/pod1 /sys/fs/cgroup ro,nosuid - cgroup2 cgroup rw\n");
    put_file(r, "proc/self/cgroup", "0::/kubepods/pod1\n");
    put_file(r, "sys/fs/cgroup/memory.max", "536870912\n");
    sx__cgroup_memory_limit(r, &lim, src, sizeof src);
    ASSERT_EQ(lim, 536870912ull);

    /* v1: the memory controller among others; "unlimited" is the page counter's maximum */
    r = fake_root("v1");
    put_file(r, "proc/self/mountinfo",
             "25 24 0:22 / /sys/fs/cgroup/memory rw,nosuid - cgroup cgroup rw,memory\n"
             "26 24 0:23 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct\n");
    put_file(r, "proc/self/cgroup", "4:cpu,cpuacct:/job\n3:memory:/job\n");
    put_file(r, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", "9223372036854771712\n");
    put_file(r, "sys/fs/cgroup/memory/memory.limit_in_bytes", "9223372036854771712\n");
    sx__cgroup_memory_limit(r, &lim, src, sizeof src);
    ASSERT_EQ(lim, 0);
    put_file(r, "sys/fs/cgroup/memory/job/memory.limit_in_bytes", "104857600\n");
    sx__cgroup_memory_limit(r, &lim, src, sizeof src);
    ASSERT_EQ(lim, 104857600ull);
    ASSERT(strstr(src, "cgroup v1 /sys/fs/cgroup/memory/job/memory.limit_in_bytes") != NULL);

    /* nothing there: no limit, no crash */
    r = fake_root("none");
    sx__cgroup_memory_limit(r, &lim, src, sizeof src);
    ASSERT_EQ(lim, 0);
    /* the real machine: whatever it has, the call answers */
    sx__cgroup_memory_limit("", &lim, src, sizeof src);
    fprintf(stderr, "  this machine's cgroup memory limit: %llu (%s)\n", (unsigned long long)lim,
            src[0] ? src : "none");

    /* the default budget: limit less max(32 MiB, limit / 8); 0 below 16 MiB left */
    ASSERT_EQ(sx__mem_default_budget(0), 0);
    ASSERT_EQ(sx__mem_default_budget(1024 * MiB), 896 * MiB);
    ASSERT_EQ(sx__mem_default_budget(100 * MiB), 68 * MiB);
    ASSERT_EQ(sx__mem_default_budget(40 * MiB), 0);
}

/* ---------------------------------------------------------------- the engine */

#define DIM 32

static sx_status make_coll(sx_db *db, const char *name, sx_collection **c)
{
    sx_field_def f[2] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                          { .name = "v", .type = SX_FIELD_FLOAT_VECTOR, .dim = DIM } };
    sx_collection_def def = { .name = name, .fields = f, .n_fields = 2, .metric = SX_METRIC_L2 };
    sx_status st = sx_collection_create(db, &def);
    if (st != SX_OK)
        return st;
    return sx_collection_open(db, name, c);
}

static sx_status insert_rows(sx_collection *c, int64_t first, size_t n, uint64_t *seed)
{
    int64_t *ids = malloc(n * sizeof *ids);
    float *v = malloc(n * DIM * sizeof *v);
    if (!ids || !v) {
        free(ids);
        free(v);
        return SX_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        ids[i] = first + (int64_t)i;
        for (size_t j = 0; j < DIM; j++)
            v[i * DIM + j] = test_randf(seed);
    }
    sx_column cols[2] = { { .name = "id", .type = SX_FIELD_INT64, .data = ids },
                          { .name = "v", .type = SX_FIELD_FLOAT_VECTOR, .data = v } };
    sx_batch b = { .cols = cols, .n_cols = 2, .n_rows = n };
    sx_status st = sx_insert(c, &b, NULL);
    free(ids);
    free(v);
    return st;
}

static void test_engine_default_from_cgroup(void)
{
    const char *r = fake_root("engine_v2");
    put_file(r, "proc/self/mountinfo", "22 1 0:21 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n");
    put_file(r, "proc/self/cgroup", "0::/svc\n");
    put_file(r, "sys/fs/cgroup/svc/memory.max", "268435456\n");
    ASSERT(setenv("SX_CGROUP_ROOT", r, 1) == 0);
    char dbdir[900];
    snprintf(dbdir, sizeof dbdir, "%s/db_default", g_dir);
    sx_db *db = NULL;
    ASSERT_OK(sx_db_open(dbdir, NULL, &db));
    sx_memory_stats m;
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.limit_bytes, 224 * MiB); /* 256 MiB less 32 MiB headroom */
    ASSERT(strstr(m.source, "memory.max") != NULL);
    sx_db_close(db);
    /* an explicit limit wins over the cgroup; SX_MEMORY_UNLIMITED means none */
    sx_db_options o = { 0 };
    o.memory_limit_bytes = 50 * MiB;
    ASSERT_OK(sx_db_open(dbdir, &o, &db));
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.limit_bytes, 50 * MiB);
    sx_db_close(db);
    o.memory_limit_bytes = SX_MEMORY_UNLIMITED;
    ASSERT_OK(sx_db_open(dbdir, &o, &db));
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.limit_bytes, 0);
    sx_db_close(db);
    ASSERT(unsetenv("SX_CGROUP_ROOT") == 0);
}

static void test_engine_small_budget(void)
{
    char dbdir[900];
    snprintf(dbdir, sizeof dbdir, "%s/db_small", g_dir);
    sx_db_options o = { 0 };
    o.memory_limit_bytes = 4 * MiB; /* 32 dims: 128 B/row -> about 30k rows fit */
    sx_db *db = NULL;
    sx_collection *c = NULL;
    ASSERT_OK(sx_db_open(dbdir, &o, &db));
    ASSERT_OK(make_coll(db, "small", &c));
    uint64_t seed = test_seed();
    const size_t batch = 5000, batches = 20; /* 100k rows, 12.8 MB of vectors: 3x the budget */
    sx_memory_stats m;
    uint64_t max_growing = 0;
    for (size_t i = 0; i < batches; i++) {
        ASSERT_OK(insert_rows(c, (int64_t)(i * batch), batch, &seed));
        sx_db_memory_stats(db, &m);
        if (m.growing_bytes > max_growing)
            max_growing = m.growing_bytes;
        /* growing rows hold at most a quarter of it (or the first batch's chunks) */
        ASSERT(m.growing_bytes <= 2 * MiB);
    }
    sx_collection_info ci;
    ASSERT_OK(sx_collection_describe(c, &ci));
    ASSERT_EQ(ci.n_rows, batch * batches);
    ASSERT(ci.n_segments >= 3);    /* sealed because of the budget, not the segment size */
    ASSERT(max_growing > MiB / 2); /* and they did fill it */
    uint64_t n = 0;
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, batch * batches);

    /* one batch larger than the whole budget: refused, named, nothing written */
    sx_status st = insert_rows(c, 1000000, 40000, &seed); /* 5.1 MB of vectors */
    ASSERT_STATUS(st, SX_ENOMEM);
    ASSERT(strstr(sx_errmsg(), "memory budget") != NULL);
    ASSERT_OK(sx_count(c, NULL, &n));
    ASSERT_EQ(n, batch * batches);

    /* a flush seals the growing rows: their charge goes back */
    ASSERT_OK(sx_flush(c));
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.growing_bytes, 0);
    /* a write refused after its charge (a key that exists) gives the charge back */
    ASSERT_STATUS(insert_rows(c, 0, 10, &seed), SX_EEXIST);
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.growing_bytes, 0);

    /* HNSW of a segment needs more than the budget has left (another holder took all but
     * 100 KiB of it): the build fails cleanly, naming the budget (it is not OOM-killed, nothing
     * stays charged to builds) */
    uint64_t other = sx__mem_avail(db->budget) - 100ull * 1024ull;
    sx__mem_force(db->budget, SX__MEM_SCRATCH, other);
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_STATUS(sx_index_wait(c, 120000), SX_ENOMEM);
    ASSERT(strstr(sx_errmsg(), "memory budget") != NULL);
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.build_bytes, 0);
    ASSERT_OK(sx_index_drop(c));
    sx__mem_give(db->budget, SX__MEM_SCRATCH, other);
    sx_collection_release(c);
    sx_db_close(db);

    /* with room, an index in RAM is charged while it serves */
    o.memory_limit_bytes = 256 * MiB;
    ASSERT_OK(sx_db_open(dbdir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "small", &c));
    ASSERT_OK(sx_index_create(c, "HNSW", NULL, 0));
    ASSERT_OK(sx_index_wait(c, 300000));
    float q[DIM] = { 0 };
    sx_search_req rq = { .queries = q, .nq = 1, .k = 5, .metric = -1 };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_search(c, &rq, &rs)); /* the index is charged once a search sees it */
    sx_rowset_free(rs);
    sx_db_memory_stats(db, &m);
    ASSERT(m.index_bytes > 0);
    ASSERT_EQ(m.build_bytes, 0);
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    ASSERT(m.index_bytes >= ii.memory_bytes);

    /* search scratch is charged for the search's duration: a batch of 2,048 queries at
     * k = 16,384 over several segments wants gigabytes of candidate lists and is refused,
     * naming the budget, before it allocates; an ordinary search then still answers and no
     * scratch stays charged */
    enum { BIGQ = 2048 };

    float *bq = calloc((size_t)BIGQ * DIM, sizeof(float));
    ASSERT(bq != NULL);
    sx_search_req big = { .queries = bq, .nq = BIGQ, .k = 16384, .metric = -1 };
    uint64_t refusals = m.refusals;
    ASSERT_STATUS(sx_search(c, &big, &rs), SX_ENOMEM);
    ASSERT(strstr(sx_errmsg(), "memory budget") != NULL);
    ASSERT(strstr(sx_errmsg(), "search scratch") != NULL);
    free(bq);
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.scratch_bytes, 0);
    ASSERT_EQ(m.refusals, refusals + 1);
    ASSERT_OK(sx_search(c, &rq, &rs));
    ASSERT_EQ(rs->topks[0], 5);
    sx_rowset_free(rs);
    sx_db_memory_stats(db, &m);
    ASSERT_EQ(m.scratch_bytes, 0);
    sx_collection_release(c);
    sx_db_close(db);
}

/* A DISKANN index whose parameters leave it no node cache gets one from the budget: the same
 * index file opened under a 256 MiB limit holds more index memory than unlimited (the cache, at
 * most a tenth of the raw bytes), answers identically, and reads fewer slots per query. */
static void nn_search(sx_collection *c, const float *q, size_t nq, int64_t *ids, uint64_t *ios)
{
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(c, &ii));
    uint64_t ios0 = ii.read_ios;
    for (size_t i = 0; i < nq; i++) {
        sx_search_req rq = { .queries = q + i * DIM, .nq = 1, .k = 10, .metric = -1 };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(c, &rq, &rs));
        ASSERT_EQ(rs->n_rows, 10);
        memcpy(ids + i * 10, rs->cols[0].data, 10 * sizeof *ids);
        sx_rowset_free(rs);
    }
    ASSERT_OK(sx_index_describe(c, &ii));
    *ios = ii.read_ios - ios0;
}

static void test_diskann_cache_from_budget(void)
{
    char dbdir[900];
    snprintf(dbdir, sizeof dbdir, "%s/db_dcache", g_dir);
    sx_db_options o = { 0 };
    o.memory_limit_bytes = SX_MEMORY_UNLIMITED;
    o.build_threads = 1;
    sx_db *db = NULL;
    sx_collection *c = NULL;
    ASSERT_OK(sx_db_open(dbdir, &o, &db));
    ASSERT_OK(make_coll(db, "d", &c));
    uint64_t seed = 11;
    const size_t n = 20000, nq = 50;
    ASSERT_OK(insert_rows(c, 0, n, &seed));
    sx_param p[] = { { "max_degree", "16" }, { "search_list_size", "32" } };
    ASSERT_OK(sx_index_create(c, "DISKANN", p, 2));
    ASSERT_OK(sx_flush(c));
    ASSERT_OK(sx_index_wait(c, 300000));
    float *q = malloc(nq * DIM * sizeof *q);
    ASSERT(q != NULL);
    for (size_t i = 0; i < nq * DIM; i++)
        q[i] = test_randf(&seed);
    int64_t *a = malloc(nq * 10 * sizeof *a), *b = malloc(nq * 10 * sizeof *b);
    ASSERT(a && b);
    sx_collection_release(c);
    sx_db_close(db);
    uint64_t mem[2], ios[2];
    for (int limited = 0; limited < 2; limited++) {
        o.memory_limit_bytes = limited ? 256 * MiB : SX_MEMORY_UNLIMITED;
        ASSERT_OK(sx_db_open(dbdir, &o, &db));
        ASSERT_OK(sx_collection_open(db, "d", &c));
        nn_search(c, q, nq, limited ? b : a, &ios[limited]);
        sx_index_info ii;
        ASSERT_OK(sx_index_describe(c, &ii));
        mem[limited] = ii.memory_bytes;
        sx_collection_release(c);
        sx_db_close(db);
    }
    uint64_t raw = (uint64_t)n * DIM * sizeof(float);
    printf("  DISKANN %zu x %d: index memory %llu B unlimited, %llu B under 256 MiB (raw %llu); "
           "slot reads for %zu queries %llu -> %llu\n",
           n, DIM, (unsigned long long)mem[0], (unsigned long long)mem[1], (unsigned long long)raw,
           nq, (unsigned long long)ios[0], (unsigned long long)ios[1]);
    ASSERT(mem[1] > mem[0] + raw / 20);  /* a cache of about a tenth of raw */
    ASSERT(mem[1] <= mem[0] + raw / 10); /* and not more */
    ASSERT(memcmp(a, b, nq * 10 * sizeof *a) == 0);
    ASSERT(ios[1] < ios[0]);
    free(q);
    free(a);
    free(b);
}

/* ---------------------------------------------------------------- the allocation fault hook */

/* One run with the fail_at-th allocation failing (0: none). */
static void fault_run(long fail_at, const char *dbdir)
{
    char cmd[1000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dbdir);
    ASSERT(system(cmd) == 0);
    sx_memory_budget *mb = NULL;
    ASSERT_OK(sx_memory_budget_new(64 * MiB, &mb));
    sx_db_options o = { 0 };
    o.memory_budget = mb;
    sx_db *db = NULL;
    sx_collection *c = NULL;
    uint64_t seed = 7;
    sx__alloc_fail_after(fail_at);
    if (sx_db_open(dbdir, &o, &db) == SX_OK) {
        if (make_coll(db, "f", &c) == SX_OK) {
            sx__ignore(insert_rows(c, 0, 1000, &seed));
            sx__ignore(sx_flush(c));
            sx__ignore(insert_rows(c, 1000, 200, &seed));
            /* the one injected failure is past by now: a flush that failed is retried (a
             * sealed segment it left unwritten gets written and its build queued here) */
            sx__ignore(sx_flush(c));
            if (sx_index_create(c, "HNSW", NULL, 0) == SX_OK)
                sx__ignore(sx_index_wait(c, 2000)); /* a lost build job must not hang the sweep */
            float q[DIM] = { 0 };
            sx_search_req rq = { .queries = q, .nq = 1, .k = 5, .metric = -1 };
            sx_rowset *rs = NULL;
            if (sx_search(c, &rq, &rs) == SX_OK)
                sx_rowset_free(rs);
            sx_collection_release(c);
        }
        sx_db_close(db);
    }
    sx__alloc_fail_after(0);
    sx_memory_stats m;
    sx_memory_budget_stats(mb, &m);
    if (m.used_bytes != 0)
        FAILF("allocation %ld failing: %llu bytes still charged after close (growing %llu, "
              "index %llu, build %llu, cache %llu)",
              fail_at, (unsigned long long)m.used_bytes, (unsigned long long)m.growing_bytes,
              (unsigned long long)m.index_bytes, (unsigned long long)m.build_bytes,
              (unsigned long long)m.cache_bytes);
    if (fail_at == 0)
        ASSERT(m.peak_bytes > 0); /* the clean run did charge */
    sx_memory_budget_free(mb);
}

static void test_fault_hook_balances(void)
{
    char dbdir[900];
    snprintf(dbdir, sizeof dbdir, "%s/db_fault", g_dir);
    fault_run(0, dbdir);
    /* every one of the first allocations (open, create, the inserts and the flush), then a
     * widening stride through the build, the search and the close */
    long runs = 0, at = 1;
    while (at < 60000) {
        fault_run(at, dbdir);
        runs++;
        at += at < 200 ? 1 : at / 8;
    }
    fprintf(stderr, "  fault sweep: %ld runs (allocations 1..%ld), budget back to 0 after each\n",
            runs, at);
}

int main(void)
{
    snprintf(g_dir, sizeof g_dir, "%s", test_tmpdir("test_membudget"));
    RUN(test_accounting);
    RUN(test_concurrent_takes);
    RUN(test_cgroup_probe);
    RUN(test_engine_default_from_cgroup);
    RUN(test_engine_small_budget);
    RUN(test_diskann_cache_from_budget);
    RUN(test_fault_hook_balances);
    int rc = TEST_DONE();
    if (rc == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", g_dir);
    }
    return rc;
}
