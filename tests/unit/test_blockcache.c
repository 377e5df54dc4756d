/*
 * test_blockcache.c: the object-store block cache (src/storage/blockcache.c) over the file://
 * backend, wrapped by a test backend that counts ranged GETs and can delay, fail or corrupt them.
 *   - LRU: reads under a limit of three blocks hit, miss and evict in LRU order (the exact
 *     victims are checked by counting GETs on re-reads), bytes are the object's;
 *   - a read spanning several missing blocks is one ranged GET; a short last block; a read past
 *     the end is SX_EINVAL; a limit below one block still serves correct bytes;
 *   - concurrent readers of one missing block: one GET (the others wait: waits == readers - 1);
 *   - a failing GET: the fetcher and every waiter get the store's error, nothing is cached, the
 *     next read fetches again and succeeds;
 *   - DISKANN through the cache (sx__diskann_load_reader): search results and io_stats identical
 *     to the local file; a corrupted slot from the store is SX_ECORRUPT, as a bad local sector,
 *     and the bad block is dropped, so the next search (clean store) succeeds.
 */
#include <pthread.h>
#include <sextant.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "harness.h"
#include "index/diskann/diskann.h"
#include "index/index.h"
#include "storage/blockcache.h"
#include "storage/objstore.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"

#define BLK 4096u

static char dir[600];

/* ---------------------------------------------------------------- a wrapping test backend */

typedef struct wrap {
    sx__objstore base;
    sx__objstore *inner;
    atomic_long ranges;   /* get_range calls */
    atomic_long delay_ms; /* sleep in get_range */
    atomic_long fail;     /* > 0: that many next get_range calls fail (SX_EREMOTE) */
    atomic_ullong bad_lo; /* corrupt bytes [bad_lo, bad_hi) of returned ranges */
    atomic_ullong bad_hi;
} wrap;

static sx_status w_put(sx__objstore *o, const char *k, const void *d, size_t n)
{
    return ((wrap *)o)->inner->ops->put(((wrap *)o)->inner, k, d, n);
}

static sx_status w_put_file(sx__objstore *o, const char *k, const char *p)
{
    return ((wrap *)o)->inner->ops->put_file(((wrap *)o)->inner, k, p);
}

static sx_status w_get(sx__objstore *o, const char *k, void **d, size_t *n)
{
    return ((wrap *)o)->inner->ops->get(((wrap *)o)->inner, k, d, n);
}

static sx_status w_get_file(sx__objstore *o, const char *k, const char *p)
{
    return ((wrap *)o)->inner->ops->get_file(((wrap *)o)->inner, k, p);
}

static sx_status w_get_range(sx__objstore *o, const char *k, uint64_t off, size_t len, void *buf)
{
    wrap *w = (wrap *)o;
    atomic_fetch_add(&w->ranges, 1);
    long ms = atomic_load(&w->delay_ms);
    if (ms > 0) {
        struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
        nanosleep(&ts, NULL);
    }
    long f = atomic_load(&w->fail);
    while (f > 0) {
        if (atomic_compare_exchange_weak(&w->fail, &f, f - 1))
            return sx__err(SX_EREMOTE, "test store: get_range %s: injected 503", k);
    }
    sx_status st = w->inner->ops->get_range(w->inner, k, off, len, buf);
    uint64_t lo = atomic_load(&w->bad_lo), hi = atomic_load(&w->bad_hi);
    for (uint64_t b = lo; st == SX_OK && b < hi; b++)
        if (b >= off && b < off + len)
            ((uint8_t *)buf)[b - off] ^= 0x5A;
    return st;
}

static sx_status w_head(sx__objstore *o, const char *k, uint64_t *s)
{
    return ((wrap *)o)->inner->ops->head(((wrap *)o)->inner, k, s);
}

static sx_status w_del(sx__objstore *o, const char *k)
{
    return ((wrap *)o)->inner->ops->del(((wrap *)o)->inner, k);
}

static sx_status w_list(sx__objstore *o, const char *p, char ***k, uint64_t **s, size_t *n)
{
    return ((wrap *)o)->inner->ops->list(((wrap *)o)->inner, p, k, s, n);
}

static void w_free(sx__objstore *o)
{
    sx__objstore_free(((wrap *)o)->inner);
    free(o);
}

static const sx__objstore_ops wrap_ops = {
    .scheme = "test",
    .put = w_put,
    .put_file = w_put_file,
    .get = w_get,
    .get_file = w_get_file,
    .get_range = w_get_range,
    .head = w_head,
    .del = w_del,
    .list = w_list,
    .free = w_free,
};

static wrap *wrap_open(const char *sub)
{
    char url[800];
    snprintf(url, sizeof url, "file://%s/%s", dir, sub);
    wrap *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->base.ops = &wrap_ops;
    w->base.url = NULL;
    if (sx__objstore_open(url, NULL, &w->inner) != SX_OK) {
        free(w);
        return NULL;
    }
    return w;
}

static uint8_t pat(uint64_t i)
{
    return (uint8_t)(i * 131 + (i >> 12) * 7 + 3);
}

/* Puts an object of `size` pattern bytes under key. */
static void put_pattern(wrap *w, const char *key, size_t size)
{
    uint8_t *b = malloc(size);
    ASSERT(b);
    for (size_t i = 0; i < size; i++)
        b[i] = pat(i);
    ASSERT_OK(sx__objstore_put(&w->base, key, b, size));
    free(b);
}

/* Reads [off, off+len) through the cache and checks the bytes. */
static void read_check(sx__bc_object *ob, uint64_t off, size_t len)
{
    uint8_t *b = malloc(len);
    ASSERT(b);
    ASSERT_OK(sx__blockcache_read(ob, off, len, b));
    for (size_t i = 0; i < len; i++)
        if (b[i] != pat(off + i)) {
            unsigned got = b[i];
            free(b);
            FAILF("byte %llu: %u, want %u", (unsigned long long)(off + i), got, pat(off + i));
        }
    free(b);
}

/* ---------------------------------------------------------------- LRU */

static void test_lru(void)
{
    wrap *w = wrap_open("lru");
    ASSERT(w);
    size_t size = 10 * BLK + 100; /* 11 blocks, the last one short */
    put_pattern(w, "o/a", size);
    sx__blockcache *bc = NULL;
    ASSERT_OK(sx__blockcache_new(&w->base, 3 * BLK, BLK, &bc));
    sx__bc_object *ob = NULL;
    ASSERT_OK(sx__blockcache_open(bc, "o/a", size, &ob));
    sx__blockcache_stats s;

    read_check(ob, 0 * BLK + 10, 100); /* miss 0 */
    read_check(ob, 1 * BLK, BLK);      /* miss 1 */
    read_check(ob, 2 * BLK + 5, 7);    /* miss 2 */
    ASSERT_EQ(atomic_load(&w->ranges), 3);
    read_check(ob, 0, 64); /* hit 0: LRU order now 1 (oldest), 2, 0 */
    ASSERT_EQ(atomic_load(&w->ranges), 3);
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.hits, 1);
    ASSERT_EQ(s.misses, 3);
    ASSERT_EQ(s.evictions, 0);
    ASSERT_EQ(s.resident_bytes, 3 * BLK);
    read_check(ob, 3 * BLK, 1); /* miss 3: evicts 1 */
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.evictions, 1);
    ASSERT_EQ(s.resident_bytes, 3 * BLK);
    long r = atomic_load(&w->ranges);
    read_check(ob, 2 * BLK, 1); /* 2 is still there: order 0, 3, 2 */
    read_check(ob, 0, 1);       /* 0 too: order 3, 2, 0 */
    ASSERT_EQ(atomic_load(&w->ranges), r);
    read_check(ob, 1 * BLK, 1); /* 1 was evicted: fetched again, evicts 3 */
    ASSERT_EQ(atomic_load(&w->ranges), r + 1);
    read_check(ob, 2 * BLK, 1);
    read_check(ob, 0, 1);
    ASSERT_EQ(atomic_load(&w->ranges), r + 1);
    read_check(ob, 3 * BLK, 1); /* 3 was the victim */
    ASSERT_EQ(atomic_load(&w->ranges), r + 2);
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.evictions, 3);

    /* a read over four missing blocks (5..8) is one ranged GET, the short last block too */
    r = atomic_load(&w->ranges);
    read_check(ob, 5 * BLK + 3, 3 * BLK + 10);
    ASSERT_EQ(atomic_load(&w->ranges), r + 1);
    read_check(ob, 9 * BLK + 1, BLK + 99); /* blocks 9 and 10 (100 bytes) */
    ASSERT_EQ(atomic_load(&w->ranges), r + 2);
    sx__blockcache_stats_get(bc, &s);
    ASSERT(s.resident_bytes <= 3 * BLK);
    ASSERT_EQ(s.fetches, (uint64_t)atomic_load(&w->ranges));
    ASSERT_STATUS(sx__blockcache_read(ob, size - 10, 11, (uint8_t[16]){ 0 }), SX_EINVAL);
    sx__blockcache_close(ob);
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.resident_bytes, 0); /* closing the last handle drops its blocks */
    sx__blockcache_release(bc);

    /* a limit below one block: correct bytes, nothing kept */
    ASSERT_OK(sx__blockcache_new(&w->base, 100, BLK, &bc));
    ASSERT_OK(sx__blockcache_open(bc, "o/a", size, &ob));
    r = atomic_load(&w->ranges);
    read_check(ob, 0, 3 * BLK);
    read_check(ob, 0, 3 * BLK);
    ASSERT_EQ(atomic_load(&w->ranges), r + 2);
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.resident_bytes, 0);
    ASSERT_EQ(s.evictions, 6);
    sx__blockcache_release(bc); /* the open object keeps the cache alive */
    read_check(ob, 7, 9);
    sx__blockcache_close(ob);
    sx__objstore_free(&w->base);
}

/* ---------------------------------------------------------------- coalescing and errors */

typedef struct reader_arg {
    sx__bc_object *ob;
    pthread_barrier_t *bar;
    uint64_t off;
    sx_status st;
    char msg[256];
    bool bytes_ok;
} reader_arg;

static void *reader_main(void *p)
{
    reader_arg *a = p;
    uint8_t buf[512];
    pthread_barrier_wait(a->bar);
    a->st = sx__blockcache_read(a->ob, a->off, sizeof buf, buf);
    snprintf(a->msg, sizeof a->msg, "%s", a->st == SX_OK ? "" : sx_errmsg());
    a->bytes_ok = true;
    for (size_t i = 0; a->st == SX_OK && i < sizeof buf; i++)
        a->bytes_ok = a->bytes_ok && buf[i] == pat(a->off + i);
    return NULL;
}

#define READERS 8

/* READERS threads read inside one missing block at once; returns the GETs issued. */
static long race(wrap *w, sx__bc_object *ob, reader_arg *args)
{
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, READERS);
    pthread_t th[READERS];
    long before = atomic_load(&w->ranges);
    for (int i = 0; i < READERS; i++) {
        args[i].ob = ob;
        args[i].bar = &bar;
        args[i].off = 4 * BLK + (uint64_t)i * 100;
        pthread_create(&th[i], NULL, reader_main, &args[i]);
    }
    for (int i = 0; i < READERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    return atomic_load(&w->ranges) - before;
}

static void test_coalesce_and_errors(void)
{
    wrap *w = wrap_open("race");
    ASSERT(w);
    size_t size = 8 * BLK;
    put_pattern(w, "o/b", size);
    sx__blockcache *bc = NULL;
    ASSERT_OK(sx__blockcache_new(&w->base, 1 << 20, BLK, &bc));
    sx__bc_object *ob = NULL;
    ASSERT_OK(sx__blockcache_open(bc, "o/b", size, &ob));
    reader_arg args[READERS];
    sx__blockcache_stats s;

    /* a slow failing GET: the fetcher and every waiter see the error; nothing is cached */
    memset(args, 0, sizeof args);
    atomic_store(&w->delay_ms, 200);
    atomic_store(&w->fail, 1);
    long gets = race(w, ob, args);
    ASSERT_EQ(gets, 1);
    for (int i = 0; i < READERS; i++) {
        ASSERT_EQ(args[i].st, SX_EREMOTE);
        ASSERT(strstr(args[i].msg, "injected 503") != NULL);
    }
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.fetch_errors, 1);
    ASSERT_EQ(s.waits, READERS - 1);
    ASSERT_EQ(s.resident_bytes, 0);
    ASSERT_EQ(s.bytes_fetched, 0);

    /* the same race with a healthy store: one GET serves all */
    memset(args, 0, sizeof args);
    gets = race(w, ob, args);
    ASSERT_EQ(gets, 1);
    for (int i = 0; i < READERS; i++) {
        ASSERT_OK(args[i].st);
        ASSERT(args[i].bytes_ok);
    }
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.fetches, 2);
    ASSERT_EQ(s.misses, 2); /* the failed and the good fetch of block 4 */
    ASSERT_EQ(s.waits, 2 * (READERS - 1));
    ASSERT_EQ(s.bytes_fetched, BLK);
    ASSERT_EQ(s.resident_bytes, BLK);

    /* now cached: no GET at all */
    atomic_store(&w->delay_ms, 0);
    memset(args, 0, sizeof args);
    gets = race(w, ob, args);
    ASSERT_EQ(gets, 0);
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.hits, READERS);

    /* the store's error through the dispatch layer (injected fault), then recovery */
    sx__objstore_fault_set(SX__OBJ_FAULT_GET, 1, false, false);
    uint8_t buf[16];
    ASSERT_STATUS(sx__blockcache_read(ob, 0, sizeof buf, buf), SX_EREMOTE);
    read_check(ob, 0, 16);
    sx__objstore_fault_clear_all();
    /* a missing object: SX_ENOTFOUND, not cached */
    sx__bc_object *gone = NULL;
    ASSERT_OK(sx__blockcache_open(bc, "o/none", 3 * BLK, &gone));
    ASSERT_STATUS(sx__blockcache_read(gone, 0, sizeof buf, buf), SX_ENOTFOUND);
    sx__blockcache_close(gone);
    sx__blockcache_close(ob);
    sx__blockcache_release(bc);
    sx__objstore_free(&w->base);
}

/* ---------------------------------------------------------------- DISKANN through the cache */

#define DN  3000
#define DD  24
#define DNQ 30
#define DK  10

static sx_status rd_read(void *ctx, uint64_t off, size_t len, void *buf)
{
    return sx__blockcache_read(ctx, off, len, buf);
}

static void rd_invalidate(void *ctx, uint64_t off, size_t len)
{
    sx__blockcache_invalidate(ctx, off, len);
}

static void rd_close(void *ctx)
{
    sx__blockcache_close(ctx);
}

static sx_status queries(const sx__index *idx, const float *q, uint32_t *ids, float *dists)
{
    sx_param sp[] = { { "search_list", "32" }, { "beam_width", "4" } };
    sx__hit store[DK];
    for (size_t i = 0; i < DNQ; i++) {
        sx__topk t;
        sx__topk_init(&t, store, DK);
        sx_status rc = sx__diskann_index_ops.search(idx, q + i * DD, DK, sp, 2, NULL, &t);
        if (rc != SX_OK)
            return rc;
        size_t got = sx__topk_sort(&t);
        for (size_t j = 0; j < DK; j++) {
            ids[i * DK + j] = j < got ? store[j].id : UINT32_MAX;
            dists[i * DK + j] = j < got ? store[j].dist : -1.0f;
        }
    }
    return SX_OK;
}

static void test_diskann_through_cache(void)
{
    const sx__index_ops *ops = &sx__diskann_index_ops;
    uint64_t seed = 42;
    float *v = malloc(sizeof(float) * DN * DD), *q = malloc(sizeof(float) * DNQ * DD);
    ASSERT(v && q);
    for (size_t i = 0; i < DN * DD; i++)
        v[i] = (float)(test_rand(&seed) % 1000) / 1000.0f;
    for (size_t i = 0; i < DNQ * DD; i++)
        q[i] = (float)(test_rand(&seed) % 1000) / 1000.0f;
    char pre[700], file[720];
    snprintf(pre, sizeof pre, "%s/da", dir);
    snprintf(file, sizeof file, "%s.diskann", pre);
    sx_param bp[] = { { "max_degree", "16" }, { "search_list_size", "40" } };
    sx__build_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.threads = 2;
    ctx.file_prefix = pre;
    ctx.seed = 1;
    sx__index *local = NULL;
    ASSERT_OK(ops->build(bp, 2, v, DN, DD, SX_METRIC_L2, &ctx, &local));
    sx__wbuf ram;
    sx__wbuf_init(&ram);
    ASSERT_OK(ops->serialize(local, &ram));

    wrap *w = wrap_open("diskann");
    ASSERT(w);
    ASSERT_OK(sx__objstore_put_file(&w->base, "c/seg.diskann", file));
    struct stat sb;
    ASSERT(stat(file, &sb) == 0);
    uint64_t fsize = (uint64_t)sb.st_size;
    sx__blockcache *bc = NULL;
    /* a quarter of the file: the searches must evict */
    ASSERT_OK(sx__blockcache_new(&w->base, fsize / 4, 0, &bc));
    sx__bc_object *ob = NULL;
    ASSERT_OK(sx__blockcache_open(bc, "c/seg.diskann", fsize, &ob));
    sx__diskann_reader rd = { .ctx = ob,
                              .read = rd_read,
                              .invalidate = rd_invalidate,
                              .close = rd_close,
                              .size = fsize,
                              .name = "test://c/seg.diskann" };
    sx__index *remote = NULL;
    ASSERT_OK(sx__diskann_load_reader(ram.data, ram.len, &rd, DN, DD, SX_METRIC_L2, &remote));
    ASSERT_EQ(((sx__diskann *)remote)->io_mode, SX__DISKANN_IO_READER);
    ASSERT_EQ(((sx__diskann *)remote)->fd, -1);

    uint32_t *i0 = malloc(DNQ * DK * 4), *i1 = malloc(DNQ * DK * 4);
    float *d0 = malloc(DNQ * DK * 4), *d1 = malloc(DNQ * DK * 4);
    ASSERT(i0 && i1 && d0 && d1);
    uint64_t ios0 = 0, ios1 = 0, b0 = 0, b1 = 0;
    ops->io_stats(local, &ios0, &b0);
    ASSERT_OK(queries(local, q, i0, d0));
    ops->io_stats(local, &ios1, &b1);
    uint64_t lios = ios1 - ios0, lbytes = b1 - b0;
    ASSERT_OK(queries(remote, q, i1, d1));
    ASSERT(memcmp(i0, i1, DNQ * DK * 4) == 0);
    ASSERT(memcmp(d0, d1, DNQ * DK * 4) == 0);
    ops->io_stats(remote, &ios1, &b1);
    ASSERT_EQ(ios1, lios); /* sector reads counted as for the local file */
    ASSERT_EQ(b1, lbytes);
    sx__blockcache_stats s;
    sx__blockcache_stats_get(bc, &s);
    fprintf(stderr,
            "  diskann via cache: file %llu B, %llu slot reads, hits %llu misses %llu "
            "evictions %llu GETs %llu\n",
            (unsigned long long)fsize, (unsigned long long)lios, (unsigned long long)s.hits,
            (unsigned long long)s.misses, (unsigned long long)s.evictions,
            (unsigned long long)s.fetches);
    ASSERT(s.evictions > 0);
    ASSERT(s.hits > 0);
    ASSERT(s.resident_bytes <= fsize / 4);
    ASSERT_OK(sx__diskann_check(remote)); /* the oracle over ranged reads too */

    /* a corrupted medoid slot from the store: SX_ECORRUPT, as for a bad local sector */
    const sx__diskann *d = (const sx__diskann *)remote;
    uint64_t moff = sx__diskann_slot_offset(&d->lay, sx__diskann_slot_of(&d->lay, d->medoid));
    sx__blockcache_invalidate(ob, moff, d->lay.slot_bytes); /* not cached: fetched corrupted */
    atomic_store(&w->bad_lo, moff + 17);
    atomic_store(&w->bad_hi, moff + 18);
    sx__blockcache_stats_get(bc, &s);
    uint64_t inv = s.invalidations;
    ASSERT_STATUS(queries(remote, q, i1, d1), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "checksum mismatch") != NULL);
    sx__blockcache_stats_get(bc, &s);
    ASSERT(s.invalidations > inv); /* the bad block was dropped */
    /* the store heals (a truncated body, a bad proxy): the next search fetches it again */
    atomic_store(&w->bad_lo, 0);
    atomic_store(&w->bad_hi, 0);
    ASSERT_OK(queries(remote, q, i1, d1));
    ASSERT(memcmp(i0, i1, DNQ * DK * 4) == 0);

    /* a store failure during search is the store's error, not a wrong answer */
    sx__blockcache_invalidate(ob, moff, d->lay.slot_bytes);
    atomic_store(&w->fail, 1);
    ASSERT_STATUS(queries(remote, q, i1, d1), SX_EREMOTE);
    ASSERT_OK(queries(remote, q, i1, d1));

    /* a header that does not match is refused at load (rd is not taken over on failure) */
    sx__bc_object *ob2 = NULL;
    ASSERT_OK(sx__blockcache_open(bc, "c/seg.diskann", fsize, &ob2));
    rd.ctx = ob2;
    rd.size = fsize - 4096; /* too short for the layout */
    sx__index *bad = NULL;
    ASSERT_STATUS(sx__diskann_load_reader(ram.data, ram.len, &rd, DN, DD, SX_METRIC_L2, &bad),
                  SX_ECORRUPT);
    sx__blockcache_close(ob2);

    ops->free(remote); /* closes ob */
    sx__blockcache_stats_get(bc, &s);
    ASSERT_EQ(s.resident_bytes, 0);
    sx__blockcache_release(bc);
    ops->free(local);
    sx__wbuf_fini(&ram);
    sx__objstore_free(&w->base);
    free(v);
    free(q);
    free(i0);
    free(i1);
    free(d0);
    free(d1);
}

int main(void)
{
    snprintf(dir, sizeof dir, "%s", test_tmpdir("test_blockcache"));
    RUN(test_lru);
    RUN(test_coalesce_and_errors);
    RUN(test_diskann_through_cache);
    int rc = TEST_DONE();
    if (rc == 0) {
        char cmd[700];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cannot remove %s\n", dir);
    }
    return rc;
}
