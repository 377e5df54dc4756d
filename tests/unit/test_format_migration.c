/*
 * test_format_migration.c: a collection written by an earlier build opens with this one.
 * The fixture tests/data/format-2026-12-04/db was written by make_fixture.c (next to it) with
 * main at ebed395: manifest version 1, segment version 2, an HNSW index file, a delete file and
 * WAL records after the checkpoint (the writer ended with _exit). Checked on a copy: every live
 * row has the values the generator's formula gives, the deleted keys are gone (those in the delete
 * file and those only in the WAL), filters and searches work, the old index file is used, and new
 * writes, a flush and a compaction rewrite the collection in today's format, which reopens with
 * the same rows.
 */
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

#define DIM 4

static char dir[600];
static sx_db *db;
static sx_collection *coll;

static void open_db(void)
{
    sx_db_options o = { 0 };
    o.build_threads = 1;
    ASSERT_OK(sx_db_open(dir, &o, &db));
    ASSERT_OK(sx_collection_open(db, "legacy", &coll));
}

static void close_db(void)
{
    sx_collection_release(coll);
    sx_db_close(db);
    coll = NULL;
    db = NULL;
}

static bool live_key(int64_t id)
{
    if (id >= 1000 && id < 1011)
        return false;
    if (id >= 1100 && id < 1105)
        return false;
    return id >= 1000 && id < 1150;
}

/* every row of the collection has the generator's values; returns the number of rows */
static size_t check_rows(size_t extra_from, size_t extra_to)
{
    const char *out[] = { "*" };
    sx_rowset *rs = NULL;
    ASSERT_OK(sx_query(coll, NULL, out, 1, 0, 0, &rs));
    const sx_column *cid = NULL, *cscore = NULL, *cflag = NULL, *ctag = NULL, *cv = NULL;
    for (size_t k = 0; k < rs->n_cols; k++) {
        const char *n = rs->cols[k].name;
        if (!strcmp(n, "id"))
            cid = &rs->cols[k];
        else if (!strcmp(n, "score"))
            cscore = &rs->cols[k];
        else if (!strcmp(n, "flag"))
            cflag = &rs->cols[k];
        else if (!strcmp(n, "tag"))
            ctag = &rs->cols[k];
        else if (!strcmp(n, "v"))
            cv = &rs->cols[k];
    }
    ASSERT(cid && cscore && cflag && ctag && cv);
    bool seen[200] = { false };
    for (size_t r = 0; r < rs->n_rows; r++) {
        int64_t id = ((const int64_t *)cid->data)[r];
        bool extra = id >= (int64_t)(1000 + extra_from) && id < (int64_t)(1000 + extra_to);
        ASSERT(live_key(id) || extra);
        int i = (int)(id - 1000);
        ASSERT(i >= 0 && i < 200 && !seen[i]);
        seen[i] = true;
        ASSERT(((const double *)cscore->data)[r] == i * 0.5);
        ASSERT(((const bool *)cflag->data)[r] == (i % 3 == 0));
        char want[16];
        snprintf(want, sizeof want, "t%d", i);
        ASSERT(!strcmp(((char *const *)ctag->data)[r], want));
        for (int d = 0; d < DIM; d++)
            ASSERT(((const float *)cv->data)[r * DIM + (size_t)d] == (float)(i + d));
    }
    for (int i = 0; i < 150; i++)
        ASSERT(seen[i] == live_key(1000 + i));
    size_t n = rs->n_rows;
    sx_rowset_free(rs);
    return n;
}

static void check_filters_and_search(int extra_to)
{
    uint64_t n = 0;
    ASSERT_OK(sx_count(coll, NULL, &n));
    size_t want_live = 0, want_flag = 0, want_tag = 0;
    for (int i = 0; i < extra_to; i++) {
        if (i < 150 && !live_key(1000 + i))
            continue;
        want_live++;
        want_flag += (i % 3 == 0) && i * 0.5 >= 20.0;
        want_tag += i >= 120 && i < 130; /* t12_: one more character */
    }
    ASSERT_EQ(n, want_live);
    ASSERT_OK(sx_count(coll, "flag == true and score >= 20.0", &n));
    ASSERT_EQ(n, want_flag);
    ASSERT_OK(sx_count(coll, "tag like \"t12_\"", &n));
    ASSERT_EQ(n, want_tag);
    /* a self hit through the old index (segment 1) and through replayed rows */
    int hits[] = { 42, 77, 140 };
    for (size_t h = 0; h < 3; h++) {
        float q[DIM];
        for (int d = 0; d < DIM; d++)
            q[d] = (float)(hits[h] + d);
        sx_param p[] = { { "ef", "32" } };
        sx_search_req req = {
            .queries = q, .nq = 1, .k = 3, .params = p, .n_params = 1, .metric = -1
        };
        sx_rowset *rs = NULL;
        ASSERT_OK(sx_search(coll, &req, &rs));
        ASSERT(rs->n_rows >= 1);
        ASSERT_EQ(((const int64_t *)rs->cols[0].data)[0], 1000 + hits[h]);
        ASSERT(rs->distances[0] == 0.0f);
        sx_rowset_free(rs);
    }
}

static uint32_t file_version(const char *path)
{
    FILE *f = fopen(path, "rb");
    ASSERT(f != NULL);
    uint8_t b[12];
    ASSERT_EQ(fread(b, 1, 12, f), 12u);
    fclose(f);
    return (uint32_t)b[8] | (uint32_t)b[9] << 8 | (uint32_t)b[10] << 16 | (uint32_t)b[11] << 24;
}

/* the version of every file of the collection named *suffix (and that there is one) */
static void check_versions(const char *suffix, uint32_t want)
{
    char cmd[1400], list[700];
    snprintf(list, sizeof list, "%s.list", dir);
    snprintf(cmd, sizeof cmd, "ls %s/collections/legacy/*%s > %s", dir, suffix, list);
    ASSERT(system(cmd) == 0);
    FILE *lf = fopen(list, "r");
    ASSERT(lf != NULL);
    char line[700];
    int n = 0;
    while (fgets(line, sizeof line, lf)) {
        line[strcspn(line, "\n")] = 0;
        if (file_version(line) != want)
            FAILF("%s: version %u, want %u", line, file_version(line), want);
        n++;
    }
    fclose(lf);
    ASSERT(n >= 1);
}

static void test_open_old_format(void)
{
    const char *src = getenv("SX_SOURCE_DIR");
    ASSERT(src != NULL); /* set by ctest; the fixture is part of the tree, never skipped */
    snprintf(dir, sizeof dir, "%s/db", test_tmpdir("migrate"));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "cp -r '%s/tests/data/format-2026-12-04/db' '%s'", src, dir);
    ASSERT(system(cmd) == 0);
    check_versions("MANIFEST", 1); /* what the older build wrote */
    check_versions(".sxs", 2);

    open_db();
    sx_index_info ii;
    ASSERT_OK(sx_index_describe(coll, &ii));
    ASSERT(!strcmp(ii.type, "HNSW"));
    ASSERT_OK(sx_index_wait(coll, 0));
    ASSERT_EQ(check_rows(0, 0), 134u);
    check_filters_and_search(150);
    close_db();

    /* replayed again (nothing flushed yet): same rows */
    open_db();
    ASSERT_EQ(check_rows(0, 0), 134u);

    /* new rows with the generator's formula, a flush, a compaction: today's format */
    int n = 20;
    int64_t id[20];
    double score[20];
    bool flag[20];
    char *tag[20];
    char tagbuf[20][16];
    float v[20 * DIM];
    for (int j = 0; j < n; j++) {
        int i = 150 + j;
        id[j] = 1000 + i;
        score[j] = i * 0.5;
        flag[j] = i % 3 == 0;
        snprintf(tagbuf[j], 16, "t%d", i);
        tag[j] = tagbuf[j];
        for (int d = 0; d < DIM; d++)
            v[j * DIM + d] = (float)(i + d);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, id },
                         { "score", SX_FIELD_DOUBLE, score },
                         { "flag", SX_FIELD_BOOL, flag },
                         { "tag", SX_FIELD_VARCHAR, tag },
                         { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { (size_t)n, cols, 5 };
    ASSERT_OK(sx_insert(coll, &b, NULL));
    ASSERT_OK(sx_flush(coll));
    ASSERT_OK(sx_compact(coll));
    ASSERT_OK(sx_index_wait(coll, 0));
    ASSERT_EQ(check_rows(150, 170), 154u);
    close_db();
    check_versions("MANIFEST", 2); /* rewritten in today's format */
    check_versions(".sxs", 3);

    open_db();
    ASSERT_EQ(check_rows(150, 170), 154u);
    check_filters_and_search(170);
    close_db();
}

int main(void)
{
    RUN(test_open_old_format);
    return TEST_DONE();
}
