/*
 * test_openmem.c: opening a collection costs memory independent of its raw size (issue 14,
 * "Sealed data off the heap"). Each open runs in a fresh process (this binary exec'd with
 * --child), so its peak is its own and its heap starts clean.
 *
 *  1. DISKANN: a collection of N x 64 vectors (SX_OPENMEM_N, default 200000; ids a scrambled
 *     permutation, so the segments carry a sorted-key array and not only the sorted-column
 *     shortcut) is built, its index waited for, and closed. The child resets VmHWM, opens the
 *     database and the collection, and reports the peak growth during the open (VmHWM - VmRSS
 *     before); it must stay under 25% of the raw vector bytes (before: the segment files were
 *     CRC'd through their mapping, so every page was resident, and the pk map held 40 bytes a
 *     slot for every row). Then, on the reopened collection: a search finds a stored vector at
 *     distance 0, gets by id return the right rows (present and absent keys), a delete and an
 *     upsert of existing keys change the count as they must (the key indexes answer them).
 *     The PQ codes DISKANN keeps in RAM are the default 1/8 of the raw bytes (m = 32 bytes for
 *     64 dims), held once: the loader keeps them in the buffer the index file was read into
 *     (before, it copied them out of it, and the two alone took 25% of raw at the peak).
 *  2. pk map: two collections without index, SMALL and BIG rows, reopened each in a child: the
 *     pkmap bytes of the memory budget (sx_db_memory_stats) and the anonymous memory (RssAnon)
 *     the open adds must not grow with the rows: BIG's pkmap bytes at most SMALL's + 64 KiB, and
 *     the extra anonymous memory of BIG over SMALL under 4 bytes a row (one hash slot was 40).
 * A sealed segment is also served from its file right after the flush that wrote it: after
 * sx_flush the parent's sealed heap, growing heap (the chunks of the segment sealed in place) and
 * pk map bytes are checked to be a small fraction of the raw bytes.
 *  3. format versions: a collection whose segment file is rewritten as format version 1 (no key
 *     block) opens, answers gets, deletes and upserts (its key index built in the heap, counted
 *     as pkmap bytes), passes sx_db_check, and is rewritten as version 2 by compaction; so does
 *     a version 2 file written with no column flagged as the primary key; a key
 *     block damaged with valid CRCs (two rows swapped) opens (the open checks CRCs and sizes)
 *     but fails sx_db_check with SX_ECORRUPT; a Bloom filter byte flipped fails the open.
 * Under sanitizers (RSS says nothing) only the outcomes are asserted; figures are printed.
 * Skipped (77) when /proc/self/clear_refs is not writable.
 */
#include <dirent.h>
#include <errno.h>
#include <sextant.h>
#include <sys/wait.h>

#include "harness.h"
#include "storage/segfile.h"
#include "util/buf.h"
#include "util/crc32c.h"

#define DIM 64

typedef struct result {
    int done;
    uint64_t base_kb, hwm_kb;         /* VmRSS before the open, VmHWM after it */
    uint64_t anon_before, anon_after; /* RssAnon */
    uint64_t file_before, file_after; /* RssFile + RssShmem (code, mappings, io_uring rings) */
    uint64_t pkmap_bytes, sealed_bytes, index_bytes;
    uint64_t count;
    int hits; /* of 20 self-queries, those answered with the query's own row first */
} result;

static size_t g_n = 200000;

/* Row i's id: a bijection of [0, 2^32) (odd multiplier), so ids are unique and unsorted. */
static int64_t id_of(size_t i)
{
    return (int64_t)(((uint64_t)i * 2654435761u) & 0xffffffffu);
}

/* Row i's vector: a random point of an 8-dimensional subspace (a fixed random 64 x 8 basis), so
 * a graph index finds a stored vector reliably (uniform 64-d noise is the hardest case for ANN,
 * and this test is about memory, not recall). */
static void vec_of(size_t i, float *v)
{
    enum { LAT = 8 };

    static float basis[DIM][LAT];
    static int ready;
    if (!ready) {
        uint64_t bs = 0x0badc0ffeeull;
        for (int k = 0; k < DIM; k++)
            for (int j = 0; j < LAT; j++)
                basis[k][j] = test_randf(&bs) - 0.5f;
        ready = 1;
    }
    uint64_t s = 0x9e3779b97f4a7c15ull ^ ((uint64_t)i * 0x100000001b3ull);
    float z[LAT];
    for (int j = 0; j < LAT; j++)
        z[j] = test_randf(&s);
    for (int k = 0; k < DIM; k++) {
        float a = 0.0f;
        for (int j = 0; j < LAT; j++)
            a += basis[k][j] * z[j];
        v[k] = a;
    }
}

static void fill(sx_collection *c, size_t n)
{
    enum { B = 10000 };

    int64_t *ids = malloc(B * sizeof *ids);
    float *v = malloc((size_t)B * DIM * sizeof *v);
    ASSERT(ids && v);
    for (size_t first = 0; first < n; first += B) {
        size_t nb = n - first < B ? n - first : B;
        for (size_t i = 0; i < nb; i++) {
            ids[i] = id_of(first + i);
            vec_of(first + i, v + i * DIM);
        }
        sx_column cols[] = { { "id", SX_FIELD_INT64, ids }, { "v", SX_FIELD_FLOAT_VECTOR, v } };
        sx_batch bt = { nb, cols, 2 };
        ASSERT_OK(sx_insert(c, &bt, NULL));
    }
    free(ids);
    free(v);
}

static void create(const char *dir, size_t n, bool diskann)
{
    sx_db_options o = { 0 };
    o.build_threads = 2;
    o.sync_mode = SX_SYNC_NONE;
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, DIM, 0 } };
    sx_collection_def d = { "m", f, 2, SX_METRIC_L2 };
    ASSERT_OK(sx_collection_create(db, &d));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "m", &c));
    if (diskann) {
        sx_param dp[] = { { "max_degree", "16" }, { "search_list_size", "32" } };
        ASSERT_OK(sx_index_create(c, "DISKANN", dp, 2));
    }
    fill(c, n);
    ASSERT_OK(sx_flush(c));
    /* served from the file right after the flush: the sealed heap is the bitset and arrays */
    sx_memory_stats ms;
    sx_db_memory_stats(db, &ms);
    uint64_t raw = (uint64_t)n * DIM * sizeof(float);
    printf("# %zu rows flushed: sealed heap %llu bytes, growing %llu bytes (raw %llu), pkmap "
           "%llu\n",
           n, (unsigned long long)ms.sealed_bytes, (unsigned long long)ms.growing_bytes,
           (unsigned long long)raw, (unsigned long long)ms.pkmap_bytes);
    ASSERT(ms.sealed_bytes < raw / 20);
    ASSERT(ms.growing_bytes < raw / 20); /* the sealed-in-place chunks went with the swap */
    ASSERT(ms.pkmap_bytes <= 64 * 1024); /* the hash map shrank to its empty table */
    if (diskann)
        ASSERT_OK(sx_index_wait(c, 0));
    sx_collection_release(c);
    sx_db_close(db);
}

static uint64_t anon_kb(void)
{
    return test_vm_kb("RssAnon");
}

/* The child: open, measure, then check lookups through the reopened key indexes. */
static void child_body(const char *dir, size_t n, bool diskann, result *r)
{
    ASSERT(test_reset_hwm());
    r->base_kb = test_vm_kb("VmRSS");
    r->anon_before = anon_kb();
    r->file_before = test_vm_kb("RssFile") + test_vm_kb("RssShmem");
    sx_db_options o = { 0 };
    o.build_threads = 1;
    o.sync_mode = SX_SYNC_NONE;
    sx_db *db;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    sx_collection *c;
    ASSERT_OK(sx_collection_open(db, "m", &c));
    r->hwm_kb = test_vm_kb("VmHWM");
    r->anon_after = anon_kb();
    r->file_after = test_vm_kb("RssFile") + test_vm_kb("RssShmem");
    sx_memory_stats ms;
    sx_db_memory_stats(db, &ms);
    r->pkmap_bytes = ms.pkmap_bytes;
    r->sealed_bytes = ms.sealed_bytes;
    r->index_bytes = ms.index_bytes;
    ASSERT_OK(sx_count(c, NULL, &r->count));
    ASSERT_EQ(r->count, n);

    /* search: stored vectors are their own nearest neighbours (all of them exactly without an
     * index; at least 16 of 20 through DISKANN, an approximate index) */
    sx_param sp[] = { { "search_list", "100" } };
    int hits = 0;
    for (size_t t = 0; t < 20; t++) {
        float q[DIM];
        size_t probe = (t * 7919 + 13) % n;
        vec_of(probe, q);
        sx_search_req req = { .queries = q, .nq = 1, .k = 5, .metric = -1 };
        if (diskann) {
            req.params = sp;
            req.n_params = 1;
        }
        sx_rowset *res;
        ASSERT_OK(sx_search(c, &req, &res));
        ASSERT(res->n_rows >= 1);
        hits +=
            ((const int64_t *)res->cols[0].data)[0] == id_of(probe) && res->distances[0] < 1e-3f;
        sx_rowset_free(res);
    }
    r->hits = hits;
    ASSERT(hits >= (diskann ? 16 : 20));
    sx_rowset *out;

    /* get by id: present keys (first, last, scattered) and absent ones */
    int64_t keys[8] = { id_of(0), id_of(n - 1),     id_of(n / 2), id_of(7),
                        -5,       (int64_t)1 << 40, id_of(n + 3), id_of(n / 5) };
    sx_keys k = { 8, keys, NULL };
    const char *outf[] = { "id", "v" };
    ASSERT_OK(sx_get(c, &k, outf, 2, &out));
    ASSERT_EQ(out->n_rows, 5);
    for (size_t i = 0; i < out->n_rows; i++) {
        int64_t id = ((const int64_t *)out->cols[0].data)[i];
        size_t row = SIZE_MAX;
        const size_t want[] = { 0, n - 1, n / 2, 7, n / 5 };
        for (size_t j = 0; j < 5; j++)
            if (id_of(want[j]) == id)
                row = want[j];
        ASSERT(row != SIZE_MAX);
        float v[DIM];
        vec_of(row, v);
        ASSERT(memcmp(v, (const float *)out->cols[1].data + i * DIM, sizeof v) == 0);
    }
    sx_rowset_free(out);

    /* delete two present keys and one absent; upsert a present key: the count says which */
    int64_t del[3] = { id_of(1), id_of(n - 2), -7 };
    sx_keys dk = { 3, del, NULL };
    uint64_t nd = 0;
    ASSERT_OK(sx_delete(c, &dk, &nd));
    ASSERT_EQ(nd, 2);
    ASSERT_OK(sx_delete(c, &dk, &nd)); /* already gone */
    ASSERT_EQ(nd, 0);
    int64_t up_id = id_of(n / 4);
    float up_v[DIM];
    for (int i = 0; i < DIM; i++)
        up_v[i] = 5.0f;
    sx_column cols[] = { { "id", SX_FIELD_INT64, &up_id }, { "v", SX_FIELD_FLOAT_VECTOR, up_v } };
    sx_batch bt = { 1, cols, 2 };
    ASSERT_OK(sx_upsert(c, &bt));
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, n - 2);
    sx_keys uk = { 1, &up_id, NULL };
    ASSERT_OK(sx_get(c, &uk, outf, 2, &out));
    ASSERT_EQ(out->n_rows, 1);
    ASSERT(((const float *)out->cols[1].data)[0] == 5.0f);
    sx_rowset_free(out);
    sx_collection_release(c);
    sx_db_close(db);
    r->done = 1;
}

/* Runs child_body in a fresh process (fork + exec of this binary with --child), so the
 * measurement starts from a clean heap, not from the parent's (which just built the data and
 * whose freed memory the child would inherit, reuse or trim). The result comes back in a
 * shared anonymous page (inherited through fork, kept across exec by its descriptor: a memfd). */
static void run_child(const char *dir, size_t n, bool diskann, result *out)
{
    char rpath[700];
    snprintf(rpath, sizeof rpath, "%s.result", dir);
    unlink(rpath);
    fflush(NULL);
    pid_t pid = fork();
    ASSERT(pid >= 0);
    if (pid == 0) {
        char ns[32];
        snprintf(ns, sizeof ns, "%zu", n);
        char *argv[] = { "/proc/self/exe",    "--child", (char *)dir, ns,
                         diskann ? "1" : "0", rpath,     NULL };
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    int ws = 0;
    while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
        ;
    if (WIFSIGNALED(ws))
        FAILF("open child killed by signal %d", WTERMSIG(ws));
    ASSERT_EQ(WEXITSTATUS(ws), 0);
    memset(out, 0, sizeof *out);
    FILE *f = fopen(rpath, "rb");
    ASSERT(f != NULL);
    size_t got = fread(out, 1, sizeof *out, f);
    (void)fclose(f);
    unlink(rpath);
    ASSERT_EQ(got, sizeof *out);
    ASSERT(out->done);
}

/* The exec'd child: --child DIR N DISKANN RESULT_PATH */
static int child_main(char **argv)
{
    result r;
    memset(&r, 0, sizeof r);
    if (setjmp(h_jmp) != 0)
        return 1; /* an ASSERT failed; it printed why */
    child_body(argv[2], (size_t)strtoull(argv[3], NULL, 10), argv[4][0] == '1', &r);
    FILE *f = fopen(argv[5], "wb");
    if (!f || fwrite(&r, 1, sizeof r, f) != sizeof r) {
        if (f)
            (void)fclose(f);
        return 1;
    }
    return fclose(f) == 0 ? 0 : 1;
}

static void skip_without_clear_refs(void)
{
    if (!test_reset_hwm())
        SKIPF("/proc/self/clear_refs is not writable: VmHWM cannot be reset");
}

static void test_diskann_open_peak(void)
{
    skip_without_clear_refs();
    const char *dir = test_tmpdir("openmem_diskann");
    char path[600];
    snprintf(path, sizeof path, "%s", dir);
    create(path, g_n, true);
    result r;
    run_child(path, g_n, true, &r);
    uint64_t raw_kb = (uint64_t)g_n * DIM * sizeof(float) / 1024;
    uint64_t growth = r.hwm_kb > r.base_kb ? r.hwm_kb - r.base_kb : 0;
    printf("# DISKANN %zu x %d (raw %llu KiB): open peak growth %llu KiB (%.1f%% of raw), "
           "anon +%llu KiB, file +%llu KiB, pkmap %llu B, sealed heap %llu B, index %llu B, "
           "self-hits %d/20\n",
           g_n, DIM, (unsigned long long)raw_kb, (unsigned long long)growth,
           100.0 * (double)growth / (double)raw_kb,
           (unsigned long long)(r.anon_after - r.anon_before),
           (unsigned long long)(r.file_after - r.file_before), (unsigned long long)r.pkmap_bytes,
           (unsigned long long)r.sealed_bytes, (unsigned long long)r.index_bytes, r.hits);
    if (!TEST_SANITIZED)
        ASSERT(growth * 4 < raw_kb);
    ASSERT(r.index_bytes > 0); /* the loaded index is charged to the budget */
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", path);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", path);
}

static void test_pkmap_does_not_grow_with_rows(void)
{
    skip_without_clear_refs();
    size_t small = g_n / 10, big = g_n;
    result rs, rb;
    char ps[600], pb[600];
    snprintf(ps, sizeof ps, "%s", test_tmpdir("openmem_small"));
    snprintf(pb, sizeof pb, "%s", test_tmpdir("openmem_big"));
    create(ps, small, false);
    create(pb, big, false);
    run_child(ps, small, false, &rs);
    run_child(pb, big, false, &rb);
    /* signed: a child's anonymous memory can shrink during the open (pages it shared with the
     * parent are freed), so the peak growth is compared too */
    int64_t as = (int64_t)rs.anon_after - (int64_t)rs.anon_before;
    int64_t ab = (int64_t)rb.anon_after - (int64_t)rb.anon_before;
    int64_t gs = (int64_t)rs.hwm_kb - (int64_t)rs.base_kb,
            gb = (int64_t)rb.hwm_kb - (int64_t)rb.base_kb;
    printf("# pk map: %zu rows -> %llu B, anon %+lld KiB, peak %+lld KiB; %zu rows -> %llu B, "
           "anon %+lld KiB, peak %+lld KiB\n",
           small, (unsigned long long)rs.pkmap_bytes, (long long)as, (long long)gs, big,
           (unsigned long long)rb.pkmap_bytes, (long long)ab, (long long)gb);
    ASSERT(rb.pkmap_bytes <= rs.pkmap_bytes + 64 * 1024);
    int64_t per_rows_kb = (int64_t)(big - small) * 4 / 1024; /* 4 bytes a row; a slot was 40 */
    if (!TEST_SANITIZED) {
        ASSERT(ab - as < per_rows_kb);
        ASSERT(gb - gs < per_rows_kb);
    }
    char cmd[1300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", ps, pb);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove the test directories\n");
}

/* ------------------------------------------------------------------ format versions */

typedef struct segbuf {
    char path[1024];
    uint8_t *p;
    size_t n;
    size_t cols_end; /* just past the last column */
    size_t meta;     /* the key block's meta (version 2), 0 if none */
} segbuf;

/* Reads the only seg-*.sxs of the collection and finds its parts (FORMAT-SEGMENT.md). */
static void seg_load(const char *dir, segbuf *b)
{
    memset(b, 0, sizeof *b);
    char cdir[800];
    snprintf(cdir, sizeof cdir, "%s/collections/m", dir);
    DIR *d = opendir(cdir);
    ASSERT(d != NULL);
    struct dirent *e;
    int found = 0;
    while ((e = readdir(d)) != NULL) {
        size_t l = strlen(e->d_name);
        if (strncmp(e->d_name, "seg-", 4) == 0 && l > 4 && strcmp(e->d_name + l - 4, ".sxs") == 0) {
            snprintf(b->path, sizeof b->path, "%s/%s", cdir, e->d_name);
            found++;
        }
    }
    closedir(d);
    ASSERT_EQ(found, 1);
    FILE *f = fopen(b->path, "rb");
    ASSERT(f != NULL);
    ASSERT(fseek(f, 0, SEEK_END) == 0);
    long sz = ftell(f);
    ASSERT(sz > 36 && fseek(f, 0, SEEK_SET) == 0);
    b->n = (size_t)sz;
    b->p = malloc(b->n);
    ASSERT(b->p && fread(b->p, 1, b->n, f) == b->n);
    (void)fclose(f);
    uint32_t nc = sx__le32(b->p + 12);
    size_t off = 36, fl = sx__le32(b->p + 8) >= 3 ? 1 : 0; /* version 3: a flags byte */
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t nl = sx__le32(b->p + off);
        uint64_t dlen = sx__le64(b->p + off + 4 + nl + 5 + fl);
        off += 4 + nl + 17 + fl;
        off += (64 - off % 64) % 64;
        off += (size_t)dlen;
        ASSERT(off <= b->n);
    }
    b->cols_end = off;
    if (sx__le32(b->p + 8) >= 2) {
        b->meta = off + (64 - off % 64) % 64;
        ASSERT(b->meta + 64 <= b->n && memcmp(b->p + b->meta, "SXPK", 4) == 0);
    }
}

/* Rewrites a version 3 file (no nullable column) in the version 1 layout: column headers
 * without the flags byte, the data re-padded, no key block; header CRC recomputed. */
static void seg_downgrade_v1(segbuf *b)
{
    ASSERT_EQ(sx__le32(b->p + 8), 3);
    uint8_t *q = calloc(1, b->n + 64);
    ASSERT(q != NULL);
    memcpy(q, b->p, 36);
    sx__put_le32(q + 8, 1);
    sx__put_le32(q + 32, sx__crc32c(0, q, 32));
    uint32_t nc = sx__le32(b->p + 12);
    size_t in = 36, out = 36;
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t nl = sx__le32(b->p + in);
        ASSERT_EQ(b->p[in + 4 + nl + 1], 0);              /* not nullable */
        memcpy(q + out, b->p + in, 4 + nl + 1);           /* name_len, name, type */
        memcpy(q + out + 5 + nl, b->p + in + 6 + nl, 16); /* dim, data_len, crc */
        uint64_t dlen = sx__le64(b->p + in + 4 + nl + 6);
        in += 4 + nl + 18;
        in += (64 - in % 64) % 64;
        out += 4 + nl + 17;
        out += (64 - out % 64) % 64;
        memcpy(q + out, b->p + in, (size_t)dlen);
        in += (size_t)dlen;
        out += (size_t)dlen;
    }
    free(b->p);
    b->p = q;
    b->n = out;
    b->cols_end = out;
    b->meta = 0;
}

static void seg_store(const segbuf *b, size_t n)
{
    FILE *f = fopen(b->path, "wb");
    ASSERT(f != NULL);
    ASSERT(fwrite(b->p, 1, n, f) == n);
    ASSERT(fclose(f) == 0);
}

static void open_db(const char *dir, sx_db **db, sx_collection **c)
{
    sx_db_options o = { 0 };
    o.sync_mode = SX_SYNC_NONE;
    ASSERT_OK(sx_db_open(dir, &o, db));
    ASSERT_OK(sx_collection_open(*db, "m", c));
}

static void test_format_versions(void)
{
    enum { N = 5000 };

    char dir[600];
    snprintf(dir, sizeof dir, "%s", test_tmpdir("openmem_versions"));
    create(dir, N, false);
    segbuf b;
    seg_load(dir, &b);
    ASSERT_EQ(sx__le32(b.p + 8), 3);
    ASSERT(b.meta != 0);
    uint8_t *v2 = malloc(b.n);
    ASSERT(v2 != NULL);
    memcpy(v2, b.p, b.n);
    size_t v2n = b.n;

    /* version 1: no flags bytes, the file ends after the columns (version 2 files are
     * tested by test_format_migration on a file an older build wrote) */
    seg_downgrade_v1(&b);
    seg_store(&b, b.cols_end);
    sx_db *db;
    sx_collection *c;
    open_db(dir, &db, &c);
    sx_memory_stats ms;
    sx_db_memory_stats(db, &ms);
    printf("# version 1 segment of %d rows: pkmap %llu bytes (its key index in the heap)\n", N,
           (unsigned long long)ms.pkmap_bytes);
    ASSERT(ms.pkmap_bytes >= (uint64_t)N * 12); /* rows + keys arrays of the heap index */
    uint64_t v1_pkmap = ms.pkmap_bytes;
    int64_t keys[4] = { id_of(3), id_of(N - 1), id_of(N), -1 };
    sx_keys k = { 4, keys, NULL };
    const char *outf[] = { "id" };
    sx_rowset *out;
    ASSERT_OK(sx_get(c, &k, outf, 1, &out));
    ASSERT_EQ(out->n_rows, 2);
    sx_rowset_free(out);
    int64_t del[2] = { id_of(10), id_of(11) };
    sx_keys dk = { 2, del, NULL };
    uint64_t nd = 0;
    ASSERT_OK(sx_delete(c, &dk, &nd));
    ASSERT_EQ(nd, 2);
    ASSERT_OK(sx_db_check(db));
    /* compaction rewrites it as version 3: the heap index goes */
    ASSERT_OK(sx_compact(c));
    uint64_t cnt = 0;
    ASSERT_OK(sx_count(c, NULL, &cnt));
    ASSERT_EQ(cnt, N - 2);
    sx_db_memory_stats(db, &ms);
    printf("# after compaction: pkmap %llu bytes\n", (unsigned long long)ms.pkmap_bytes);
    ASSERT(ms.pkmap_bytes + (uint64_t)N * 12 <= v1_pkmap); /* the hash map's table only */
    ASSERT_OK(sx_delete(c, &dk, &nd));
    ASSERT_EQ(nd, 0);
    sx_collection_release(c);
    sx_db_close(db);
    free(b.p);
    seg_load(dir, &b);
    ASSERT_EQ(sx__le32(b.p + 8), 3);
    free(b.p);

    /* a file written with no key column flagged (a writer that does not set
     * is_primary): opens with a heap key index, like version 1 */
    char dir3[600];
    snprintf(dir3, sizeof dir3, "%s", test_tmpdir("openmem_nokey"));
    create(dir3, N, false);
    seg_load(dir3, &b);
    sx__segcol expect[2] = { { .name = "id", .type = SX_FIELD_INT64 },
                             { .name = "v", .type = SX_FIELD_FLOAT_VECTOR, .dim = DIM } };
    uint64_t rows_read = 0, seg_id = sx__le64(b.p + 16);
    sx__segcol *cols = NULL;
    ASSERT_OK(sx__segfile_read(b.path, seg_id, expect, 2, &rows_read, &cols, NULL));
    ASSERT_EQ(rows_read, N);
    ASSERT_OK(sx__segfile_write(b.path, seg_id, rows_read, cols, 2)); /* is_primary unset */
    sx__segcols_free(cols, 2, rows_read);
    free(b.p);
    open_db(dir3, &db, &c);
    sx_db_memory_stats(db, &ms);
    ASSERT(ms.pkmap_bytes >= (uint64_t)N * 12);
    ASSERT_OK(sx_get(c, &k, outf, 1, &out));
    ASSERT_EQ(out->n_rows, 2);
    sx_rowset_free(out);
    ASSERT_OK(sx_db_check(db));
    sx_collection_release(c);
    sx_db_close(db);

    /* a key block damaged with valid CRCs: the open accepts it, the check does not */
    char dir2[600];
    snprintf(dir2, sizeof dir2, "%s", test_tmpdir("openmem_damaged"));
    create(dir2, N, false);
    seg_load(dir2, &b);
    ASSERT_EQ(b.n, v2n);
    ASSERT(memcmp(b.p, v2, 8) == 0);
    ASSERT((sx__le32(b.p + b.meta + 8) & 1) == 0); /* not sorted: a rows array follows */
    size_t rows = b.meta + 64;
    uint32_t r0 = sx__le32(b.p + rows), r1 = sx__le32(b.p + rows + 4);
    sx__put_le32(b.p + rows, r1);
    sx__put_le32(b.p + rows + 4, r0);
    sx__put_le32(b.p + b.meta + 48, sx__crc32c(0, b.p + rows, (size_t)N * 4));
    sx__put_le32(b.p + b.meta + 60, sx__crc32c(0, b.p + b.meta, 60));
    seg_store(&b, b.n);
    open_db(dir2, &db, &c);
    ASSERT_STATUS(sx_db_check(db), SX_ECORRUPT);
    printf("# damaged key block: sx_db_check says: %s\n", sx_errmsg());
    sx_collection_release(c);
    sx_db_close(db);
    /* a Bloom filter byte flipped (CRC not fixed): the open refuses the segment */
    b.p[b.n - 3] ^= 0x10;
    seg_store(&b, b.n);
    sx_db_options o = { 0 };
    ASSERT_STATUS(sx_db_open(dir2, &o, &db), SX_ECORRUPT);
    printf("# flipped Bloom byte: sx_db_open says: %s\n", sx_errmsg());
    free(b.p);
    free(v2);
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s' '%s'", dir, dir2, dir3);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove the test directories\n");
}

int main(int argc, char **argv)
{
    if (argc == 6 && strcmp(argv[1], "--child") == 0)
        return child_main(argv);
    const char *e = getenv("SX_OPENMEM_N");
    if (e && strtoull(e, NULL, 10) >= 1000)
        g_n = (size_t)strtoull(e, NULL, 10);
    if (TEST_SANITIZED && !e)
        g_n = 20000;
    RUN(test_diskann_open_peak);
    RUN(test_pkmap_does_not_grow_with_rows);
    RUN(test_format_versions);
    return TEST_DONE();
}
