/*
 * fuzz_wal.c: libFuzzer harness for the WAL reader (src/storage/wal.h) and the engine's replay of
 * WAL records into a collection.
 *
 * Input byte 0 picks the mode:
 *   even: the rest is a WAL file's bytes (bit 1 clear: with its header and record CRCs
 *         recomputed first; set: exactly as given). Decoded record by record with the pure decoder
 *         (sx__wal_record_decode), then written as <tmp>/wal/wal-00000000000000000001.log and
 *         opened three ways: read-only with a replay callback, the offline check
 *         (sx__wal_check), and read-write (torn-tail truncation, then one append and close).
 *   odd:  the rest is a list of records [type u8][len u16 LE][len payload bytes] (a short last
 *         payload is cut): they are encoded with valid CRCs and LSNs 1, 2, ... into the WAL of a
 *         fixture collection (schema: fuzz_common.h) whose other files were made once by the
 *         engine, and the database is opened, so the engine decodes the payloads (insert, upsert,
 *         delete batches); then count, query and close.
 * Every error status is a normal outcome.
 */
#include "fuzz_common.h"
#include "storage/wal.h"
#include "util/buf.h"
#include "util/crc32c.h"
#include "util/err.h"

#define MAX_SNAP 64

/* A snapshot of the fixture database directory (everything but the WAL's files). */
typedef struct snap_ent {
    char rel[256];
    bool is_dir;
    uint8_t *bytes;
    size_t len;
} snap_ent;

static snap_ent g_snap[MAX_SNAP];
static size_t g_n_snap;
static char g_root[512];   /* fixture snapshot source */
static char g_walraw[600]; /* mode even: the WAL directory */
static char g_db[600];     /* mode odd: the database restored per input */
static char g_dbwal[700];  /* mode odd: the collection's WAL directory */
static size_t g_root_len;

static int snap_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)ftw;
    if (strlen(p) <= g_root_len || g_n_snap >= MAX_SNAP)
        return 0;
    const char *rel = p + g_root_len + 1;
    if (strstr(rel, "/wal/") || strcmp(rel, "LOCK") == 0)
        return 0;
    snap_ent *e = &g_snap[g_n_snap];
    snprintf(e->rel, sizeof e->rel, "%s", rel);
    if (flag == FTW_D) {
        e->is_dir = true;
    } else if (flag == FTW_F) {
        e->bytes = fz_read_file(p, &e->len);
        if (!e->bytes)
            return 0;
    } else {
        return 0;
    }
    g_n_snap++;
    return 0;
}

static void restore_db(void)
{
    fz_rm_rf(g_db);
    mkdir(g_db, 0755);
    char path[1024];
    for (size_t i = 0; i < g_n_snap; i++) {
        snprintf(path, sizeof path, "%s/%s", g_db, g_snap[i].rel);
        if (g_snap[i].is_dir)
            mkdir(path, 0755);
        else
            fz_write_file(path, g_snap[i].bytes, g_snap[i].len);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *tmp = fz_tmpdir("wal");
    snprintf(g_walraw, sizeof g_walraw, "%s/wal", tmp);
    snprintf(g_db, sizeof g_db, "%s/db", tmp);
    snprintf(g_root, sizeof g_root, "%s/fixture", tmp);
    g_root_len = strlen(g_root);
    snprintf(g_dbwal, sizeof g_dbwal, "%s/collections/c/wal", g_db);
    sx_db_options o = { .sync_mode = SX_SYNC_NONE, .build_threads = 1, .search_threads = 1 };
    sx_db *db = NULL;
    sx_collection_def d = fz_fixture_def("c");
    if (sx_db_open(g_root, &o, &db) != SX_OK || sx_collection_create(db, &d) != SX_OK) {
        fprintf(stderr, "fuzz_wal: fixture: %s\n", sx_errmsg());
        exit(2);
    }
    sx_db_close(db);
    nftw(g_root, snap_cb, 16, FTW_PHYS);
    return 0;
}

static sx_status replay_cb(void *ctx, uint64_t lsn, uint8_t type, const void *payload, size_t len)
{
    size_t *sum = ctx;
    const uint8_t *p = payload;
    /* read the payload's ends: the borrowed bytes must be valid */
    if (len > 0)
        *sum += p[0] + p[len - 1];
    *sum += (size_t)lsn + type;
    return SX_OK;
}

static void mode_raw(const uint8_t *data, size_t size)
{
    /* the pure decoder, record after record */
    size_t off = size >= SX__WAL_HEADER_BYTES ? SX__WAL_HEADER_BYTES : 0;
    while (off < size) {
        sx__wal_rec rec;
        size_t used = 0;
        if (sx__wal_record_decode(data + off, size - off, &rec, &used) != SX_OK || used == 0)
            break;
        if (used > size - off)
            abort(); /* the decoder claimed bytes it was not given */
        off += used;
    }

    fz_rm_rf(g_walraw);
    mkdir(g_walraw, 0755);
    char path[700];
    snprintf(path, sizeof path, "%s/wal-00000000000000000001.log", g_walraw);
    if (!fz_write_file(path, data, size))
        return;
    size_t sum = 0;
    sx__wal *w = NULL;
    if (sx__wal_open(g_walraw, 0, false, true, replay_cb, &sum, &w) == SX_OK)
        sx__ignore(sx__wal_close(w));
    uint64_t n = 0;
    sx__ignore(sx__wal_check(g_walraw, &n));
    w = NULL;
    if (sx__wal_open(g_walraw, 0, false, false, replay_cb, &sum, &w) == SX_OK) {
        uint64_t lsn = 0;
        static const char rec[] = "after-recovery";
        if (sx__wal_append(w, 1, rec, sizeof rec, &lsn) == SX_OK)
            sx__ignore(sx__wal_sync(w, lsn));
        sx__ignore(sx__wal_close(w));
    }
}

static void mode_engine(const uint8_t *data, size_t size)
{
    restore_db();
    mkdir(g_dbwal, 0755);
    sx__wbuf wb;
    sx__wbuf_init(&wb);
    /* file header, as wal.c writes it */
    uint8_t hdr[SX__WAL_HEADER_BYTES] = { 'S', 'X', 'W', 'A', 'L', '0', '0', '1', 1 };
    sx__put_le64(hdr + 16, 1);
    sx__put_le32(hdr + 28, sx__crc32c(0, hdr, 28));
    sx__wbuf_put(&wb, hdr, sizeof hdr);
    uint64_t lsn = 1;
    size_t off = 0;
    while (off < size) {
        uint8_t type = data[off++];
        size_t len = 0;
        if (off < size)
            len = data[off++];
        if (off < size)
            len |= (size_t)data[off++] << 8;
        if (len > size - off)
            len = size - off;
        sx__wal_record_encode(&wb, lsn++, type, data + off, len);
        off += len;
    }
    char path[800];
    snprintf(path, sizeof path, "%s/wal-00000000000000000001.log", g_dbwal);
    bool ok = sx__wbuf_ok(&wb) && fz_write_file(path, wb.data, wb.len);
    sx__wbuf_fini(&wb);
    if (!ok)
        return;
    sx_db_options o = { .sync_mode = SX_SYNC_NONE, .build_threads = 1, .search_threads = 1 };
    sx_db *db = NULL;
    if (sx_db_open(g_db, &o, &db) != SX_OK)
        return;
    sx_collection *c = NULL;
    if (sx_collection_open(db, "c", &c) == SX_OK) {
        uint64_t cnt = 0;
        sx__ignore(sx_count(c, NULL, &cnt));
        sx__ignore(sx_count(c, "age > 10 or name like \"a%\"", &cnt));
        static const char *const all[] = { "*" };
        sx_rowset *rs = NULL;
        if (sx_query(c, NULL, all, 1, 100, 0, &rs) == SX_OK)
            sx_rowset_free(rs);
        float q[FZ_DIM] = { 0 };
        sx_search_req req = { .queries = q, .nq = 1, .k = 5, .metric = -1 };
        rs = NULL;
        if (sx_search(c, &req, &rs) == SX_OK)
            sx_rowset_free(rs);
        sx_collection_release(c);
    }
    sx_db_close(db);
}

/* Recomputes the file header's CRC and each record's CRC (as far as the lengths fit). */
static void fix_crcs(uint8_t *p, size_t n)
{
    if (n < SX__WAL_HEADER_BYTES)
        return;
    fz_fix_crc(p, n, 0, 28, 28);
    size_t off = SX__WAL_HEADER_BYTES;
    while (n - off >= SX__WAL_REC_OVERHEAD) {
        uint32_t len = sx__le32(p + off);
        if (len > n - off - SX__WAL_REC_OVERHEAD)
            return;
        fz_fix_crc(p, n, off, off + 16 + len, off + 16 + len);
        off += SX__WAL_REC_OVERHEAD + len;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    if (data[0] & 1) {
        mode_engine(data + 1, size - 1);
    } else if (data[0] & 2) {
        mode_raw(data + 1, size - 1);
    } else {
        /* mode 0 with bit 1 clear: the CRCs are recomputed first, so mutations reach the record
         * decoding and the recovery logic behind the checksums */
        uint8_t *c = fz_dup(data + 1, size - 1);
        if (!c)
            return 0;
        fix_crcs(c, size - 1);
        mode_raw(c, size - 1);
        free(c);
    }
    return 0;
}
