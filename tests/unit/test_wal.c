/*
 * test_wal.c: the write-ahead log (src/storage/wal.c): record codec, replay after reopen, torn
 * tails at every byte offset, mid-log corruption, rotation and truncation, group commit under
 * 8 threads, and sticky failure after injected fsync/write faults (through src/platform/fs.c).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "harness.h"
#include "platform/fs.h"
#include "storage/wal.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

static char g_base[512];
static uint64_t g_seed;

/* ------------------------------------------------------------------ helpers */

static const char *subdir(const char *name)
{
    static char buf[640];
    (void)snprintf(buf, sizeof buf, "%s/%s", g_base, name);
    if (sx__fs_rmtree(buf) != SX_OK || sx__fs_mkdir_p(buf) != SX_OK) {
        (void)fprintf(stderr, "cannot prepare %s: %s\n", buf, sx_errmsg());
        exit(2);
    }
    return buf;
}

static void wal_file(char *out, size_t n, const char *dir, uint64_t first_lsn)
{
    (void)snprintf(out, n, "%s/wal-%020" PRIu64 ".log", dir, first_lsn);
}

static uint64_t file_size(const char *path)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return UINT64_MAX;
    return (uint64_t)sb.st_size;
}

static sx_status write_file(const char *path, const void *p, size_t n)
{
    sx__file *f = NULL;
    sx_status st = sx__file_open(path, SX__F_WRITE | SX__F_CREATE | SX__F_TRUNC, &f);
    if (st != SX_OK)
        return st;
    st = sx__file_append(f, p, n);
    sx_status cst = sx__file_close(f);
    return st != SX_OK ? st : cst;
}

static size_t count_wal_files(const char *dir)
{
    char **names = NULL;
    size_t n = 0, k = 0;
    if (sx__fs_list(dir, &names, &n) != SX_OK)
        return (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (strncmp(names[i], "wal-", 4) == 0)
            k++;
        sx__free(names[i]);
    }
    sx__free(names);
    return k;
}

/* Deterministic payload bytes of record `lsn`. */
static void gen_payload(uint8_t *p, size_t n, uint64_t seed, uint64_t lsn)
{
    uint64_t s = seed ^ (lsn * 0x9E3779B97F4A7C15ull) ^ 0x5DEECE66Dull;
    if (s == 0)
        s = 1;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = test_rand(&s);
        memcpy(p + i, &v, 8);
    }
    if (i < n) {
        uint64_t v = test_rand(&s);
        memcpy(p + i, &v, n - i);
    }
}

/* Sizes from 0 bytes to 1 MiB, mostly small. */
static uint32_t rand_size(uint64_t *s)
{
    uint64_t r = test_rand(s) % 100;
    if (r < 40)
        return (uint32_t)(test_rand(s) % 65);
    if (r < 80)
        return (uint32_t)(test_rand(s) % 4097);
    if (r < 95)
        return (uint32_t)(test_rand(s) % 65537);
    return (uint32_t)(test_rand(s) % ((1u << 20) + 1));
}

#define MAXR 4096

/* What the log should hold: record lsn = first_lsn + i has len[i], type[i], gen_payload bytes. */
typedef struct model {
    uint64_t seed;
    uint64_t first_lsn;
    size_t n;
    uint32_t len[MAXR];
    uint8_t type[MAXR];
} model;

typedef struct replay {
    const model *m;
    uint64_t next; /* LSN expected next */
    uint64_t count;
    int bad;
    char why[256];
    uint8_t *scratch; /* 1 MiB */
} replay;

static void replay_init(replay *r, const model *m, uint64_t first)
{
    memset(r, 0, sizeof *r);
    r->m = m;
    r->next = first;
    r->scratch = sx__malloc((1u << 20) + 1);
}

static void replay_fini(replay *r)
{
    sx__free(r->scratch);
}

static sx_status check_cb(void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len)
{
    replay *r = ctx;
    const model *m = r->m;
    if (r->bad)
        return SX_OK;
    if (lsn != r->next) {
        r->bad = 1;
        (void)snprintf(r->why, sizeof r->why, "LSN %" PRIu64 ", expected %" PRIu64, lsn, r->next);
        return SX_OK;
    }
    if (lsn < m->first_lsn || lsn - m->first_lsn >= m->n) {
        r->bad = 1;
        (void)snprintf(r->why, sizeof r->why, "LSN %" PRIu64 " not in the model", lsn);
        return SX_OK;
    }
    size_t i = (size_t)(lsn - m->first_lsn);
    if (type != m->type[i] || len != m->len[i]) {
        r->bad = 1;
        (void)snprintf(r->why, sizeof r->why, "LSN %" PRIu64 ": type %u len %zu, expected %u %u",
                       lsn, type, len, m->type[i], m->len[i]);
        return SX_OK;
    }
    gen_payload(r->scratch, len, m->seed, lsn);
    if (len && memcmp(payload, r->scratch, len) != 0) {
        r->bad = 1;
        (void)snprintf(r->why, sizeof r->why, "LSN %" PRIu64 ": payload differs", lsn);
        return SX_OK;
    }
    r->next++;
    r->count++;
    return SX_OK;
}

/* Appends model records [from, to) (index into the model). */
static sx_status append_model(sx__wal *w, const model *m, size_t from, size_t to, uint8_t *scratch)
{
    for (size_t i = from; i < to; i++) {
        uint64_t lsn = m->first_lsn + i, got = 0;
        gen_payload(scratch, m->len[i], m->seed, lsn);
        sx_status st = sx__wal_append(w, m->type[i], scratch, m->len[i], &got);
        if (st != SX_OK)
            return st;
        if (got != lsn)
            return sx__err(SX_EINVAL, "append got LSN %" PRIu64 ", want %" PRIu64, got, lsn);
    }
    return SX_OK;
}

static model *model_new(uint64_t seed, uint64_t first, size_t n, uint32_t fixed_len)
{
    model *m = sx__calloc(1, sizeof *m);
    if (!m)
        exit(2);
    m->seed = seed;
    m->first_lsn = first;
    m->n = n;
    uint64_t s = seed ? seed : 1;
    for (size_t i = 0; i < n; i++) {
        m->len[i] = fixed_len != UINT32_MAX ? fixed_len : rand_size(&s);
        m->type[i] = (uint8_t)(1 + test_rand(&s) % 200);
    }
    return m;
}

/* Opens dir replaying into a fresh checker; *count = records replayed. */
static sx_status open_check(const char *dir,
                            uint64_t after,
                            const model *m,
                            bool do_sync,
                            bool read_only,
                            sx__wal **w,
                            uint64_t *count,
                            int *bad)
{
    replay r;
    replay_init(&r, m, after + 1);
    sx_status st = sx__wal_open(dir, after, do_sync, read_only, check_cb, &r, w);
    *count = r.count;
    *bad = r.bad;
    if (r.bad)
        (void)fprintf(stderr, "  replay mismatch: %s\n", r.why);
    replay_fini(&r);
    return st;
}

/* ------------------------------------------------------------------ codec */

static void test_codec(void)
{
    uint64_t s = g_seed | 1;
    uint8_t *pl = sx__malloc((1u << 20) + 1);
    ASSERT(pl);
    sx__wbuf wb;
    sx__wbuf_init(&wb);
    uint32_t sizes[] = { 0, 1, 7, 16, 100, 4096, 65537, 1u << 20 };
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        sx__wbuf_reset(&wb);
        uint64_t lsn = test_rand(&s);
        uint8_t type = (uint8_t)test_rand(&s);
        gen_payload(pl, sizes[k], s, lsn);
        sx__wal_record_encode(&wb, lsn, type, pl, sizes[k]);
        ASSERT(sx__wbuf_ok(&wb));
        ASSERT_EQ(wb.len, sizes[k] + SX__WAL_REC_OVERHEAD);
        /* explicit little-endian header */
        ASSERT_EQ(sx__le32(wb.data), sizes[k]);
        ASSERT_EQ(wb.data[4], type);
        ASSERT_EQ(sx__le64(wb.data + 8), lsn);
        sx__wal_rec rec;
        size_t nb = 0;
        ASSERT_OK(sx__wal_record_decode(wb.data, wb.len, &rec, &nb));
        ASSERT_EQ(nb, wb.len);
        ASSERT_EQ(rec.lsn, lsn);
        ASSERT_EQ(rec.type, type);
        ASSERT_EQ(rec.len, sizes[k]);
        ASSERT(sizes[k] == 0 || memcmp(rec.payload, pl, sizes[k]) == 0);
        /* every truncation is rejected (small records: all of them; large: a sample) */
        size_t step = wb.len > 4096 ? 997 : 1;
        for (size_t cut = 0; cut < wb.len; cut += step)
            ASSERT_STATUS(sx__wal_record_decode(wb.data, cut, &rec, &nb), SX_ECORRUPT);
        /* every flipped byte is rejected */
        for (size_t i = 0; i < wb.len; i += step) {
            wb.data[i] ^= 0x20;
            ASSERT_STATUS(sx__wal_record_decode(wb.data, wb.len, &rec, &nb), SX_ECORRUPT);
            wb.data[i] ^= 0x20;
        }
    }
    /* trailing bytes after a record are not part of it */
    sx__wbuf_reset(&wb);
    sx__wal_record_encode(&wb, 5, 1, "abc", 3);
    sx__wal_record_encode(&wb, 6, 2, "de", 2);
    sx__wal_rec rec;
    size_t nb = 0;
    ASSERT_OK(sx__wal_record_decode(wb.data, wb.len, &rec, &nb));
    ASSERT_EQ(nb, 23);
    ASSERT_OK(sx__wal_record_decode(wb.data + nb, wb.len - nb, &rec, &nb));
    ASSERT_EQ(rec.lsn, 6);
    ASSERT_EQ(rec.len, 2);
    sx__wbuf_fini(&wb);
    sx__free(pl);
}

/* ------------------------------------------------------------------ round trip */

static void test_roundtrip_reopen(void)
{
    const char *dir = subdir("roundtrip");
    size_t n1 = 300, n2 = 60;
    model *m = model_new(g_seed, 1, n1 + n2, UINT32_MAX);
    m->len[0] = 0;
    m->len[1] = 1u << 20;
    m->len[n1 - 1] = 1u << 20;
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    ASSERT(scratch);
    uint64_t s = g_seed ^ 77;
    sx__wal *w = NULL;
    uint64_t cnt = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 0);
    ASSERT_EQ(sx__wal_last_lsn(w), 0);
    /* append in random-size batches, syncing after each */
    size_t i = 0;
    while (i < n1) {
        size_t b = 1 + (size_t)(test_rand(&s) % 16);
        if (i + b > n1)
            b = n1 - i;
        ASSERT_OK(append_model(w, m, i, i + b, scratch));
        i += b;
        ASSERT_OK(sx__wal_sync(w, i));
        ASSERT_EQ(sx__wal_durable_lsn(w), i);
    }
    ASSERT_EQ(sx__wal_last_lsn(w), n1);
    uint64_t total = SX__WAL_HEADER_BYTES;
    for (size_t k = 0; k < n1; k++)
        total += m->len[k] + SX__WAL_REC_OVERHEAD;
    ASSERT_EQ(sx__wal_bytes(w), total);
    ASSERT_OK(sx__wal_close(w));
    char path[700];
    wal_file(path, sizeof path, dir, 1);
    ASSERT_EQ(file_size(path), total);

    /* reopen: identical types, LSNs and payload bytes */
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, n1);
    ASSERT_EQ(sx__wal_last_lsn(w), n1);
    ASSERT_EQ(sx__wal_durable_lsn(w), n1);
    /* appends continue; close flushes unsynced records */
    ASSERT_OK(append_model(w, m, n1, n1 + n2, scratch));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, n1 + n2);
    ASSERT_OK(sx__wal_close(w));
    uint64_t nrec = 0;
    ASSERT_OK(sx__wal_check(dir, &nrec));
    ASSERT_EQ(nrec, n1 + n2);
    sx__free(scratch);
    sx__free(m);
}

static void test_replay_after_lsn(void)
{
    const char *dir = subdir("after");
    model *m = model_new(g_seed + 1, 1, 200, UINT32_MAX);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, false, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 100, scratch));
    ASSERT_OK(sx__wal_close(w));
    /* replay skips LSN <= after_lsn */
    ASSERT_OK(open_check(dir, 37, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 63);
    ASSERT_EQ(sx__wal_last_lsn(w), 100);
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 100, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 0);
    ASSERT_OK(append_model(w, m, 100, 101, scratch)); /* LSN 101 */
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 100, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 1);
    ASSERT_OK(sx__wal_close(w));

    /* the checkpoint is past the end of the log (lost unsynced tail): start over after it */
    model *m2 = model_new(g_seed + 2, 151, 10, 40);
    ASSERT_OK(open_check(dir, 150, m2, true, false, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 0);
    ASSERT_EQ(sx__wal_last_lsn(w), 150);
    ASSERT_OK(append_model(w, m2, 0, 3, scratch)); /* LSNs 151..153 */
    ASSERT_OK(sx__wal_close(w));
    ASSERT_EQ(count_wal_files(dir), 1);
    ASSERT_OK(open_check(dir, 150, m2, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 3);
    ASSERT_OK(sx__wal_close(w));
    /* records 1..150 are gone: asking for them is a gap, not silent data loss */
    ASSERT_STATUS(open_check(dir, 0, m2, true, false, &w, &cnt, &bad), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "LSN gap") != NULL);
    sx__free(m2);
    sx__free(scratch);
    sx__free(m);
}

/* ------------------------------------------------------------------ torn tail */

static void test_torn_tail_every_offset(void)
{
    const char *dir = subdir("torn");
    model *m = model_new(g_seed + 3, 1, 7, UINT32_MAX);
    for (int i = 0; i < 5; i++)
        m->len[i] = 10 + (uint32_t)i * 17;
    m->len[5] = 300; /* the record that gets torn: 320 bytes on disk */
    m->len[6] = 25;  /* its replacement after recovery */
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 6, scratch));
    ASSERT_OK(sx__wal_sync(w, 6));
    ASSERT_OK(sx__wal_close(w));
    char path[700];
    wal_file(path, sizeof path, dir, 1);
    void *orig = NULL;
    size_t orig_len = 0;
    ASSERT_OK(sx__fs_read_all(path, 1u << 20, &orig, &orig_len));
    size_t rec_start = orig_len - (300 + SX__WAL_REC_OVERHEAD);

    for (size_t cut = rec_start; cut < orig_len; cut++) {
        /* the WAL as a crash left it: the last record cut at `cut` */
        ASSERT_OK(write_file(path, orig, cut));
        m->n = 6;
        m->len[5] = 300;
        ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
        ASSERT_EQ(bad, 0);
        ASSERT_EQ(cnt, 5);                     /* all earlier records replayed */
        ASSERT_EQ(sx__wal_last_lsn(w), 5);     /* the torn one is gone */
        ASSERT_EQ(file_size(path), rec_start); /* and truncated on disk */
        /* appends continue with the right LSN */
        m->len[5] = 25;
        uint64_t lsn = 0;
        gen_payload(scratch, 25, m->seed, 6);
        ASSERT_OK(sx__wal_append(w, m->type[5], scratch, 25, &lsn));
        ASSERT_EQ(lsn, 6);
        ASSERT_OK(sx__wal_sync(w, lsn));
        ASSERT_OK(sx__wal_close(w));
        ASSERT_OK(open_check(dir, 0, m, false, true, &w, &cnt, &bad));
        ASSERT_EQ(bad, 0);
        ASSERT_EQ(cnt, 6);
        ASSERT_OK(sx__wal_close(w));
    }
    /* a flipped byte in the last record, nothing valid after it: also a torn tail */
    ASSERT_OK(write_file(path, orig, orig_len));
    ((uint8_t *)orig)[orig_len - 50] ^= 0x40;
    ASSERT_OK(write_file(path, orig, orig_len));
    ((uint8_t *)orig)[orig_len - 50] ^= 0x40;
    m->len[5] = 300;
    m->n = 5;
    uint64_t nrec = 0;
    ASSERT_OK(sx__wal_check(dir, &nrec)); /* the checker allows a torn tail */
    ASSERT_EQ(nrec, 5);
    /* read-only: replays the valid prefix, never modifies the file */
    ASSERT_OK(open_check(dir, 0, m, true, true, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 5);
    uint64_t lsn = 0;
    ASSERT_STATUS(sx__wal_append(w, 1, "x", 1, &lsn), SX_EINVAL);
    ASSERT_OK(sx__wal_close(w));
    ASSERT_EQ(file_size(path), orig_len);
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 5);
    ASSERT_EQ(file_size(path), rec_start);
    ASSERT_OK(sx__wal_close(w));
    sx__free(orig);
    sx__free(scratch);
    sx__free(m);
}

static void test_torn_header(void)
{
    const char *dir = subdir("tornhdr");
    model *m = model_new(g_seed + 4, 1, 20, 33);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0, next = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 10, scratch));
    ASSERT_OK(sx__wal_rotate(w, &next));
    ASSERT_EQ(next, 11);
    ASSERT_OK(sx__wal_close(w));
    char path[700];
    wal_file(path, sizeof path, dir, 11);
    ASSERT_EQ(file_size(path), SX__WAL_HEADER_BYTES);
    /* a crash while the new file's header was written: every cut of it */
    uint8_t hdr[SX__WAL_HEADER_BYTES];
    void *h = NULL;
    size_t hl = 0;
    ASSERT_OK(sx__fs_read_all(path, 64, &h, &hl));
    memcpy(hdr, h, sizeof hdr);
    sx__free(h);
    for (size_t cut = 0; cut < SX__WAL_HEADER_BYTES; cut++) {
        ASSERT_OK(write_file(path, hdr, cut));
        m->n = 10;
        ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
        ASSERT_EQ(bad, 0);
        ASSERT_EQ(cnt, 10);
        ASSERT_EQ(file_size(path), SX__WAL_HEADER_BYTES); /* rewritten */
        m->n = 11;
        ASSERT_OK(append_model(w, m, 10, 11, scratch));
        ASSERT_OK(sx__wal_close(w));
        ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
        ASSERT_EQ(bad, 0);
        ASSERT_EQ(cnt, 11);
        ASSERT_OK(sx__wal_close(w));
    }
    /* a garbled header in a non-last file is corruption */
    wal_file(path, sizeof path, dir, 1);
    void *d = NULL;
    size_t dl = 0;
    ASSERT_OK(sx__fs_read_all(path, 1u << 20, &d, &dl));
    ((uint8_t *)d)[3] ^= 1;
    ASSERT_OK(write_file(path, d, dl));
    ASSERT_STATUS(open_check(dir, 0, m, true, false, &w, &cnt, &bad), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "wal-00000000000000000001.log") != NULL);
    sx__free(d);
    sx__free(scratch);
    sx__free(m);
}

/* ------------------------------------------------------------------ corruption */

static void test_corrupt_middle(void)
{
    const char *dir = subdir("corrupt");
    model *m = model_new(g_seed + 5, 1, 10, 64);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0, nrec = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 10, scratch));
    ASSERT_OK(sx__wal_close(w));
    char path[700];
    wal_file(path, sizeof path, dir, 1);
    void *orig = NULL;
    size_t len = 0;
    ASSERT_OK(sx__fs_read_all(path, 1u << 20, &orig, &len));
    uint8_t *b = orig;
    size_t rl = 64 + SX__WAL_REC_OVERHEAD;
    size_t r5 = SX__WAL_HEADER_BYTES + 4 * rl; /* record with LSN 5 */
    char want[64];
    (void)snprintf(want, sizeof want, "offset %zu", r5);
    for (size_t i = 0; i < rl; i++) {
        for (int bit = 0; bit < 8; bit += 7) {
            b[r5 + i] ^= (uint8_t)(1u << bit);
            ASSERT_OK(write_file(path, b, len));
            ASSERT_STATUS(open_check(dir, 0, m, true, false, &w, &cnt, &bad), SX_ECORRUPT);
            if (!strstr(sx_errmsg(), want) || !strstr(sx_errmsg(), "wal-00000000000000000001"))
                FAILF("byte %zu: message lacks file/offset: %s", i, sx_errmsg());
            ASSERT_STATUS(sx__wal_check(dir, &nrec), SX_ECORRUPT);
            ASSERT_EQ(file_size(path), len); /* a failed open never truncates */
            b[r5 + i] ^= (uint8_t)(1u << bit);
        }
    }
    ASSERT_OK(write_file(path, b, len));
    ASSERT_OK(sx__wal_check(dir, &nrec));
    ASSERT_EQ(nrec, 10);

    /* a valid record with a wrong LSN after the last one: an LSN gap */
    sx__wbuf wb;
    sx__wbuf_init(&wb);
    sx__wbuf_put(&wb, b, len);
    sx__wal_record_encode(&wb, 12, 1, "gap", 3);
    ASSERT(sx__wbuf_ok(&wb));
    ASSERT_OK(write_file(path, wb.data, wb.len));
    sx__wbuf_fini(&wb);
    ASSERT_STATUS(open_check(dir, 0, m, true, false, &w, &cnt, &bad), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "LSN gap") != NULL);
    ASSERT_STATUS(sx__wal_check(dir, &nrec), SX_ECORRUPT);
    ASSERT_OK(write_file(path, b, len));
    ASSERT_OK(sx__wal_check(dir, &nrec));
    sx__free(orig);
    sx__free(scratch);
    sx__free(m);
}

static void test_corrupt_files(void)
{
    const char *dir = subdir("corruptfiles");
    model *m = model_new(g_seed + 6, 1, 30, 50);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0, next = 0, nrec = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 10, scratch));
    ASSERT_OK(sx__wal_rotate(w, &next));
    ASSERT_OK(append_model(w, m, 10, 20, scratch));
    ASSERT_OK(sx__wal_rotate(w, &next));
    ASSERT_OK(append_model(w, m, 20, 30, scratch));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_EQ(count_wal_files(dir), 3);
    ASSERT_OK(sx__wal_check(dir, &nrec));
    ASSERT_EQ(nrec, 30);

    /* a torn record at the end of a non-last file is corruption, not a torn tail */
    char p1[700], p2[700];
    wal_file(p1, sizeof p1, dir, 1);
    wal_file(p2, sizeof p2, dir, 11);
    void *d = NULL;
    size_t dl = 0;
    ASSERT_OK(sx__fs_read_all(p1, 1u << 20, &d, &dl));
    ASSERT_OK(write_file(p1, d, dl - 3));
    ASSERT_STATUS(open_check(dir, 0, m, true, false, &w, &cnt, &bad), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "not the last") != NULL);
    ASSERT_STATUS(sx__wal_check(dir, &nrec), SX_ECORRUPT);
    ASSERT_OK(write_file(p1, d, dl));
    sx__free(d);

    /* a missing middle file is an LSN gap */
    ASSERT_OK(sx__fs_read_all(p2, 1u << 20, &d, &dl));
    ASSERT_OK(sx__fs_unlink(p2));
    ASSERT_STATUS(open_check(dir, 0, m, true, false, &w, &cnt, &bad), SX_ECORRUPT);
    ASSERT(strstr(sx_errmsg(), "LSN gap") != NULL);
    ASSERT_STATUS(sx__wal_check(dir, &nrec), SX_ECORRUPT);
    ASSERT_OK(write_file(p2, d, dl));
    sx__free(d);
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 30);
    ASSERT_OK(sx__wal_close(w));
    sx__free(scratch);
    sx__free(m);
}

/* ------------------------------------------------------------------ rotation */

static void test_rotate_truncate(void)
{
    const char *dir = subdir("rotate");
    model *m = model_new(g_seed + 7, 1, 40, UINT32_MAX);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0, next = 0;
    int bad = 0;
    char path[700];
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 10, scratch)); /* 1..10 in wal-1 */
    ASSERT_OK(sx__wal_rotate(w, &next));
    ASSERT_EQ(next, 11);
    ASSERT_EQ(sx__wal_durable_lsn(w), 10); /* rotate flushes */
    ASSERT_OK(sx__wal_rotate(w, &next));   /* empty current file: no new file */
    ASSERT_EQ(next, 11);
    ASSERT_EQ(count_wal_files(dir), 2);
    ASSERT_OK(append_model(w, m, 10, 20, scratch)); /* 11..20 in wal-11 */
    ASSERT_OK(sx__wal_rotate(w, &next));
    ASSERT_EQ(next, 21);
    ASSERT_OK(append_model(w, m, 20, 25, scratch)); /* 21..25 in wal-21 */
    ASSERT_OK(sx__wal_sync(w, 25));
    ASSERT_EQ(count_wal_files(dir), 3);
    uint64_t bytes3 = sx__wal_bytes(w);

    ASSERT_OK(sx__wal_truncate_before(w, 10)); /* LSN 10 is still needed: nothing goes */
    ASSERT_EQ(count_wal_files(dir), 3);
    ASSERT_OK(sx__wal_truncate_before(w, 15)); /* wal-1 (1..10) goes, wal-11 (11..20) stays */
    ASSERT_EQ(count_wal_files(dir), 2);
    wal_file(path, sizeof path, dir, 1);
    ASSERT(!sx__fs_exists(path));
    wal_file(path, sizeof path, dir, 11);
    ASSERT(sx__fs_exists(path));
    ASSERT(sx__wal_bytes(w) < bytes3);
    ASSERT_OK(sx__wal_truncate_before(w, 21)); /* wal-11 fully checkpointed */
    ASSERT_EQ(count_wal_files(dir), 1);
    ASSERT_OK(sx__wal_truncate_before(w, 1000)); /* the current file is never deleted */
    ASSERT_EQ(count_wal_files(dir), 1);
    wal_file(path, sizeof path, dir, 21);
    ASSERT(sx__fs_exists(path));
    ASSERT_EQ(sx__wal_bytes(w), file_size(path));
    ASSERT_OK(append_model(w, m, 25, 30, scratch)); /* 26..30 */
    ASSERT_OK(sx__wal_close(w));

    /* replay after reopen from the checkpoint still works */
    ASSERT_OK(open_check(dir, 20, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 10);
    ASSERT_EQ(sx__wal_last_lsn(w), 30);
    ASSERT_OK(append_model(w, m, 30, 40, scratch));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 25, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 15);
    ASSERT_OK(sx__wal_close(w));
    uint64_t nrec = 0;
    ASSERT_OK(sx__wal_check(dir, &nrec));
    ASSERT_EQ(nrec, 20);
    sx__free(scratch);
    sx__free(m);
}

/* ------------------------------------------------------------------ group commit */

#define GC_THREADS 8
#define GC_PER     200

typedef struct gc_arg {
    sx__wal *w;
    int tid;
    int n;          /* records to write */
    int acked;      /* syncs that returned SX_OK */
    int failed;     /* first non-OK status seen (0 = none) */
    int after_fail; /* an append/sync after the failure returned something other than EFATAL */
    uint64_t lsns[GC_PER];
} gc_arg;

static void gc_payload(uint8_t p[64], int tid, int i)
{
    memset(p, 0, 64);
    sx__put_le32(p, (uint32_t)tid);
    sx__put_le32(p + 4, (uint32_t)i);
    for (int k = 8; k < 64; k++)
        p[k] = (uint8_t)(tid * 31 + i * 7 + k);
}

static void *gc_thread(void *a)
{
    gc_arg *g = a;
    uint8_t p[64];
    for (int i = 0; i < g->n; i++) {
        gc_payload(p, g->tid, i);
        uint64_t lsn = 0;
        sx_status st = sx__wal_append(g->w, 3, p, sizeof p, &lsn);
        if (st == SX_OK)
            st = sx__wal_sync(g->w, lsn);
        if (st != SX_OK) {
            g->failed = (int)st;
            /* sticky: everything later fails with SX_EFATAL */
            if (sx__wal_append(g->w, 3, p, sizeof p, &lsn) != SX_EFATAL ||
                sx__wal_sync(g->w, lsn) != SX_EFATAL)
                g->after_fail = 1;
            return NULL;
        }
        g->lsns[i] = lsn;
        g->acked++;
    }
    return NULL;
}

typedef struct gc_seen {
    int n_threads;
    uint64_t count;
    uint64_t next;
    int bad;
    uint64_t lsn_of[GC_THREADS][GC_PER];
} gc_seen;

static sx_status gc_cb(void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len)
{
    gc_seen *s = ctx;
    const uint8_t *p = payload;
    if (lsn != s->next || type != 3 || len != 64) {
        s->bad = 1;
        return SX_OK;
    }
    s->next++;
    uint32_t tid = sx__le32(p), i = sx__le32(p + 4);
    uint8_t want[64];
    if (tid >= (uint32_t)s->n_threads || i >= GC_PER) {
        s->bad = 1;
        return SX_OK;
    }
    gc_payload(want, (int)tid, (int)i);
    if (memcmp(want, p, 64) != 0 || s->lsn_of[tid][i] != 0) {
        s->bad = 1; /* damaged or replayed twice */
        return SX_OK;
    }
    s->lsn_of[tid][i] = lsn;
    s->count++;
    return SX_OK;
}

static void test_group_commit(void)
{
    const char *dir = subdir("group");
    sx__wal *w = NULL;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    pthread_t th[GC_THREADS];
    gc_arg *args = sx__calloc(GC_THREADS, sizeof *args);
    ASSERT(args);
    for (int t = 0; t < GC_THREADS; t++) {
        args[t].w = w;
        args[t].tid = t;
        args[t].n = GC_PER;
        ASSERT_EQ(pthread_create(&th[t], NULL, gc_thread, &args[t]), 0);
    }
    for (int t = 0; t < GC_THREADS; t++)
        ASSERT_EQ(pthread_join(th[t], NULL), 0);
    for (int t = 0; t < GC_THREADS; t++) {
        ASSERT_EQ(args[t].failed, 0);
        ASSERT_EQ(args[t].acked, GC_PER);
    }
    uint64_t total = GC_THREADS * GC_PER;
    uint64_t fsyncs = sx__wal_fsync_count(w);
    (void)printf("group commit: %d threads x %d append+sync = %" PRIu64 " records, %" PRIu64
                 " fdatasync calls (%.1f records per fsync)\n",
                 GC_THREADS, GC_PER, total, fsyncs, (double)total / (double)(fsyncs ? fsyncs : 1));
    (void)fflush(stdout);
    ASSERT(fsyncs > 0);
    ASSERT(fsyncs < total);
    ASSERT_EQ(sx__wal_durable_lsn(w), total);
    ASSERT_EQ(sx__wal_last_lsn(w), total);
    ASSERT_OK(sx__wal_close(w));

    gc_seen *seen = sx__calloc(1, sizeof *seen);
    ASSERT(seen);
    seen->n_threads = GC_THREADS;
    seen->next = 1;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, gc_cb, seen, &w));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_EQ(seen->bad, 0);
    ASSERT_EQ(seen->count, total);
    for (int t = 0; t < GC_THREADS; t++)
        for (int i = 0; i < GC_PER; i++)
            ASSERT_EQ(seen->lsn_of[t][i], args[t].lsns[i]);
    sx__free(seen);
    sx__free(args);
}

/* ------------------------------------------------------------------ faults */

static void test_fault_fsync_single(void)
{
    const char *dir = subdir("fault1");
    model *m = model_new(g_seed + 8, 1, 10, 100);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0, lsn = 0, next = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 5, scratch));
    ASSERT_OK(sx__wal_sync(w, 5)); /* 1..5 acknowledged */
    sx__fault_set(SX__FAULT_SYNC, 1, EIO, false);
    ASSERT_OK(append_model(w, m, 5, 6, scratch)); /* buffered only */
    ASSERT_STATUS(sx__wal_sync(w, 6), SX_EFATAL);
    ASSERT(strstr(sx_errmsg(), "fdatasync") != NULL);
    sx__fault_clear_all(); /* even with the disk healthy again, the WAL stays failed */
    ASSERT(sx__wal_is_fatal(w));
    ASSERT_EQ(sx__wal_durable_lsn(w), 5);
    ASSERT_STATUS(sx__wal_append(w, 1, "x", 1, &lsn), SX_EFATAL);
    ASSERT_STATUS(sx__wal_sync(w, 5), SX_EFATAL);
    ASSERT_STATUS(sx__wal_sync(w, 6), SX_EFATAL);
    ASSERT_STATUS(sx__wal_rotate(w, &next), SX_EFATAL);
    ASSERT_STATUS(sx__wal_truncate_before(w, 3), SX_EFATAL);
    ASSERT_STATUS(sx__wal_close(w), SX_EFATAL);
    /* reopen: every acknowledged record is there (6 may be too: it reached the page cache) */
    m->n = 6;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT(cnt >= 5);
    ASSERT_OK(sx__wal_close(w));
    sx__free(scratch);
    sx__free(m);
}

static void test_fault_enospc_single(void)
{
    const char *dir = subdir("fault2");
    model *m = model_new(g_seed + 9, 1, 10, 100);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0, lsn = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 4, scratch));
    ASSERT_OK(sx__wal_sync(w, 4));
    sx__fault_set(SX__FAULT_WRITE, 1, ENOSPC, false);
    ASSERT_OK(append_model(w, m, 4, 6, scratch));
    ASSERT_STATUS(sx__wal_sync(w, 6), SX_EFATAL);
    ASSERT(strstr(sx_errmsg(), "No space") != NULL);
    sx__fault_clear_all();
    ASSERT_STATUS(sx__wal_append(w, 1, "x", 1, &lsn), SX_EFATAL);
    ASSERT_STATUS(sx__wal_sync(w, 4), SX_EFATAL);
    ASSERT_STATUS(sx__wal_close(w), SX_EFATAL);
    m->n = 6;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 4); /* the failed write reached nothing */
    ASSERT_EQ(sx__wal_last_lsn(w), 4);
    ASSERT_OK(sx__wal_close(w));
    sx__free(scratch);
    sx__free(m);
}

/* Threads append+sync until the injected fault: every waiter gets SX_EFATAL, every ack survives */
static void fault_threads(const char *name, sx__fault_op op, int err, long countdown)
{
    const char *dir = subdir(name);
    sx__wal *w = NULL;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    gc_arg *args = sx__calloc(GC_THREADS, sizeof *args);
    ASSERT(args);
    pthread_t th[GC_THREADS];
    sx__fault_set(op, countdown, err, false);
    for (int t = 0; t < GC_THREADS; t++) {
        args[t].w = w;
        args[t].tid = t;
        args[t].n = GC_PER;
        ASSERT_EQ(pthread_create(&th[t], NULL, gc_thread, &args[t]), 0);
    }
    for (int t = 0; t < GC_THREADS; t++)
        ASSERT_EQ(pthread_join(th[t], NULL), 0);
    sx__fault_clear_all();
    int total_acked = 0;
    for (int t = 0; t < GC_THREADS; t++) {
        ASSERT_EQ(args[t].failed, SX_EFATAL);
        ASSERT_EQ(args[t].after_fail, 0);
        total_acked += args[t].acked;
    }
    ASSERT(sx__wal_is_fatal(w));
    ASSERT(total_acked > 0);
    ASSERT_STATUS(sx__wal_close(w), SX_EFATAL);

    gc_seen *seen = sx__calloc(1, sizeof *seen);
    ASSERT(seen);
    seen->n_threads = GC_THREADS;
    seen->next = 1;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, gc_cb, seen, &w));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_EQ(seen->bad, 0);
    ASSERT(seen->count >= (uint64_t)total_acked);
    for (int t = 0; t < GC_THREADS; t++)
        for (int i = 0; i < args[t].acked; i++)
            ASSERT_EQ(seen->lsn_of[t][i], args[t].lsns[i]); /* acknowledged => present */
    (void)fprintf(stderr,
                  "  %s: %d acknowledged before the fault, %" PRIu64 " present after reopen\n",
                  name, total_acked, seen->count);
    sx__free(seen);
    sx__free(args);
}

static void test_fault_fsync_threads(void)
{
    fault_threads("fault3", SX__FAULT_SYNC, EIO, 25);
}

static void test_fault_enospc_threads(void)
{
    fault_threads("fault4", SX__FAULT_WRITE, ENOSPC, 25);
}

/* ------------------------------------------------------------------ misc */

static void test_nosync(void)
{
    const char *dir = subdir("nosync");
    model *m = model_new(g_seed + 11, 1, 50, UINT32_MAX);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0;
    int bad = 0;
    long before = sx__fault_calls(SX__FAULT_SYNC);
    ASSERT_OK(open_check(dir, 0, m, false, false, &w, &cnt, &bad));
    for (size_t i = 0; i < 50; i++) {
        ASSERT_OK(append_model(w, m, i, i + 1, scratch));
        ASSERT_OK(sx__wal_sync(w, i + 1));
    }
    ASSERT_EQ(sx__wal_fsync_count(w), 0);
    ASSERT_EQ(sx__wal_durable_lsn(w), 50);
    uint64_t next = 0;
    ASSERT_OK(sx__wal_rotate(w, &next));
    ASSERT_EQ(next, 51);
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 0, m, false, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 50);
    ASSERT_OK(sx__wal_truncate_before(w, 51));
    ASSERT_EQ(count_wal_files(dir), 1);
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 50, m, false, false, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 0);
    ASSERT_EQ(sx__wal_last_lsn(w), 50);
    ASSERT_OK(sx__wal_close(w));
    ASSERT_EQ(sx__fault_calls(SX__FAULT_SYNC), before); /* no fsync of any kind */
    sx__free(scratch);
    sx__free(m);
}

static void test_buffer_cap(void)
{
    const char *dir = subdir("bufcap");
    model *m = model_new(g_seed + 12, 1, 12, 1u << 20);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    sx__wal *w = NULL;
    uint64_t cnt = 0;
    int bad = 0;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 12, scratch)); /* 12 MiB, never synced */
    char path[700];
    wal_file(path, sizeof path, dir, 1);
    ASSERT(file_size(path) >= (4u << 20)); /* the tail buffer was written out, bounded */
    ASSERT_EQ(sx__wal_fsync_count(w), 0);
    ASSERT_EQ(sx__wal_durable_lsn(w), 0);
    ASSERT_OK(sx__wal_sync(w, 12));
    ASSERT_EQ(sx__wal_fsync_count(w), 1);
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(bad, 0);
    ASSERT_EQ(cnt, 12);
    ASSERT_OK(sx__wal_close(w));
    sx__free(scratch);
    sx__free(m);
}

static void test_limits(void)
{
    const char *dir = subdir("limits");
    sx__wal *w = NULL;
    uint64_t lsn = 0;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    ASSERT_STATUS(sx__wal_append(w, 1, "x", (size_t)SX__WAL_MAX_RECORD + 1, &lsn), SX_EINVAL);
    ASSERT_STATUS(sx__wal_append(w, 1, NULL, 5, &lsn), SX_EINVAL);
    ASSERT_OK(sx__wal_append(w, 1, NULL, 0, &lsn));
    ASSERT_EQ(lsn, 1);
    ASSERT_OK(sx__wal_sync(w, 1000)); /* beyond the last append: syncs what there is */
    ASSERT_EQ(sx__wal_durable_lsn(w), 1);
    ASSERT(!sx__wal_is_fatal(w));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_OK(sx__wal_close(NULL));
    /* read-only open of a missing directory creates nothing */
    char missing[700];
    (void)snprintf(missing, sizeof missing, "%s/does/not/exist", dir);
    ASSERT_OK(sx__wal_open(missing, 7, true, true, NULL, NULL, &w));
    ASSERT_EQ(sx__wal_last_lsn(w), 7);
    ASSERT_STATUS(sx__wal_append(w, 1, "x", 1, &lsn), SX_EINVAL);
    uint64_t next = 0;
    ASSERT_STATUS(sx__wal_rotate(w, &next), SX_EINVAL);
    ASSERT_OK(sx__wal_close(w));
    ASSERT(!sx__fs_exists(missing));
    /* foreign files in the directory are ignored */
    char foreign[700];
    (void)snprintf(foreign, sizeof foreign, "%s/wal-notanumber.log", dir);
    ASSERT_OK(write_file(foreign, "junk", 4));
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    ASSERT_EQ(sx__wal_last_lsn(w), 1);
    ASSERT_OK(sx__wal_close(w));
}

/* A callback error aborts open and is returned as is. */
static sx_status fail_cb(void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len)
{
    (void)type;
    (void)payload;
    (void)len;
    if (lsn == *(uint64_t *)ctx)
        return sx__err(SX_ENOTFOUND, "callback refuses LSN %" PRIu64, lsn);
    return SX_OK;
}

static void test_callback_error(void)
{
    const char *dir = subdir("cberr");
    sx__wal *w = NULL;
    uint64_t lsn = 0, stop = 3;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    for (int i = 0; i < 5; i++)
        ASSERT_OK(sx__wal_append(w, 1, "abc", 3, &lsn));
    ASSERT_OK(sx__wal_close(w));
    ASSERT_STATUS(sx__wal_open(dir, 0, true, false, fail_cb, &stop, &w), SX_ENOTFOUND);
    ASSERT(strstr(sx_errmsg(), "refuses LSN 3") != NULL);
}

/* I/O faults while opening and recovering: an error, never a crash, and a clean retry works. */
static void test_open_faults(void)
{
    const char *dir = subdir("openfault");
    sx__wal *w = NULL;
    uint64_t lsn = 0, cnt = 0;
    int bad = 0;
    model *m = model_new(g_seed + 13, 1, 5, 30);
    uint8_t *scratch = sx__malloc((1u << 20) + 1);
    /* creating the first file */
    sx__fault_set(SX__FAULT_OPEN, 1, EACCES, false);
    ASSERT_STATUS(sx__wal_open(dir, 0, true, false, NULL, NULL, &w), SX_EIO);
    sx__fault_set(SX__FAULT_SYNC, 1, EIO, false);
    ASSERT_STATUS(sx__wal_open(dir, 0, true, false, NULL, NULL, &w), SX_EIO);
    sx__fault_clear_all();
    ASSERT_EQ(count_wal_files(dir), 0); /* the half-made file was removed */
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_OK(append_model(w, m, 0, 5, scratch));
    ASSERT_OK(sx__wal_close(w));
    /* a torn tail whose repair fsync fails: open fails, the next open repairs */
    char path[700];
    wal_file(path, sizeof path, dir, 1);
    void *d = NULL;
    size_t dl = 0;
    ASSERT_OK(sx__fs_read_all(path, 1u << 20, &d, &dl));
    ASSERT_OK(write_file(path, d, dl - 7));
    sx__free(d);
    sx__fault_set(SX__FAULT_SYNC, 1, EIO, false);
    ASSERT_STATUS(sx__wal_open(dir, 0, true, false, NULL, NULL, &w), SX_EIO);
    sx__fault_clear_all();
    m->n = 4;
    ASSERT_OK(open_check(dir, 0, m, true, false, &w, &cnt, &bad));
    ASSERT_EQ(cnt, 4);
    ASSERT_OK(sx__wal_append(w, 1, "z", 1, &lsn));
    ASSERT_EQ(lsn, 5);
    ASSERT_OK(sx__wal_close(w));
    /* rotation that cannot create its file makes the WAL fatal (its state is unknown) */
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    ASSERT_OK(sx__wal_append(w, 1, "y", 1, &lsn));
    sx__fault_set(SX__FAULT_OPEN, 1, ENOSPC, false);
    uint64_t next = 0;
    ASSERT_STATUS(sx__wal_rotate(w, &next), SX_EFATAL);
    sx__fault_clear_all();
    ASSERT(sx__wal_is_fatal(w));
    ASSERT_STATUS(sx__wal_close(w), SX_EFATAL);
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    ASSERT_EQ(sx__wal_last_lsn(w), 6); /* the record synced by rotate is there */
    ASSERT_OK(sx__wal_close(w));
    sx__free(scratch);
    sx__free(m);
}

/* Allocation failure at every point of open/append/sync/close: an error or success, no leak
 * (ASan), no crash. */
static void test_oom_loop(void)
{
    const char *dir = subdir("oom");
    sx__wal *w = NULL;
    uint64_t lsn = 0;
    ASSERT_OK(sx__wal_open(dir, 0, true, false, NULL, NULL, &w));
    ASSERT_OK(sx__wal_append(w, 1, "seed", 4, &lsn));
    ASSERT_OK(sx__wal_close(w));
    int ok_at = 0;
    for (long n = 1; n < 200 && !ok_at; n++) {
        sx__alloc_fail_after(n);
        sx_status st = sx__wal_open(dir, 0, true, false, NULL, NULL, &w);
        if (st == SX_OK) {
            st = sx__wal_append(w, 1, "more", 4, &lsn);
            if (st == SX_OK)
                st = sx__wal_sync(w, lsn);
            sx_status cst = sx__wal_close(w);
            if (st == SX_OK && cst == SX_OK)
                ok_at = (int)n;
        } else {
            ASSERT(st == SX_ENOMEM);
        }
        sx__alloc_fail_after(0);
    }
    sx__alloc_fail_after(0);
    ASSERT(ok_at > 0);
    uint64_t nrec = 0;
    ASSERT_OK(sx__wal_check(dir, &nrec));
    ASSERT(nrec >= 2);
}

int main(void)
{
    g_seed = test_seed();
    (void)snprintf(g_base, sizeof g_base, "%s", test_tmpdir("test_wal"));
    RUN(test_codec);
    RUN(test_roundtrip_reopen);
    RUN(test_replay_after_lsn);
    RUN(test_torn_tail_every_offset);
    RUN(test_torn_header);
    RUN(test_corrupt_middle);
    RUN(test_corrupt_files);
    RUN(test_rotate_truncate);
    RUN(test_group_commit);
    RUN(test_fault_fsync_single);
    RUN(test_fault_enospc_single);
    RUN(test_fault_fsync_threads);
    RUN(test_fault_enospc_threads);
    RUN(test_nosync);
    RUN(test_buffer_cap);
    RUN(test_limits);
    RUN(test_callback_error);
    RUN(test_open_faults);
    RUN(test_oom_loop);
    sx__fault_clear_all();
    if (h_fail == 0) {
        sx_status st = sx__fs_rmtree(g_base);
        (void)st;
    }
    return TEST_DONE();
}
