/*
 * make_fixture.c: wrote the collection directory next to this file with the storage format of
 * main at ebed395 (manifest version 1, segment files version 2, WAL version 1 with the
 * INSERT/DELETE payloads of that commit). Kept to say how the fixture was made; the migration
 * test (tests/unit/test_format_migration.c) opens the directory with today's build.
 *   cc -O1 -Iinclude make_fixture.c build/libsextant.a ... && ./a.out DIR
 * Contents (row i, i in 0..149):
 *   id = 1000 + i (INT64 primary), score = i * 0.5, flag = (i % 3 == 0), tag = "t<i>",
 *   v = {i, i + 1, i + 2, i + 3} (FLOAT_VECTOR dim 4, L2)
 * Rows 0..99: flushed into segment 1, HNSW index built (M=8, efConstruction=32), then keys
 * 1000..1009 deleted and flushed (delete file). Rows 100..149: inserted after the last flush
 * (WAL only), then keys 1100..1104 and 1010 deleted (WAL only); the process ends with _exit
 * without closing, so the last records are replayed from the WAL by the next open.
 * Live rows: 150 - 10 - 6 = 134.
 */
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define CHECK(x)                                 \
 do {                                            \
  if ((x) != SX_OK) {                            \
   fprintf(stderr, "%s: %s\n", #x, sx_errmsg()); \
   exit(1);                                      \
  }                                              \
 } while (0)

static void put(sx_collection *c, int lo, int hi)
{
    int n = hi - lo;
    int64_t *id = malloc(sizeof(int64_t) * (size_t)n);
    double *score = malloc(sizeof(double) * (size_t)n);
    bool *flag = malloc((size_t)n);
    char **tag = malloc(sizeof(char *) * (size_t)n);
    float *v = malloc(sizeof(float) * 4 * (size_t)n);
    for (int j = 0; j < n; j++) {
        int i = lo + j;
        id[j] = 1000 + i;
        score[j] = i * 0.5;
        flag[j] = i % 3 == 0;
        tag[j] = malloc(16);
        snprintf(tag[j], 16, "t%d", i);
        for (int d = 0; d < 4; d++)
            v[j * 4 + d] = (float)(i + d);
    }
    sx_column cols[] = { { "id", SX_FIELD_INT64, id },
                         { "score", SX_FIELD_DOUBLE, score },
                         { "flag", SX_FIELD_BOOL, flag },
                         { "tag", SX_FIELD_VARCHAR, tag },
                         { "v", SX_FIELD_FLOAT_VECTOR, v } };
    sx_batch b = { (size_t)n, cols, 5 };
    CHECK(sx_insert(c, &b, NULL));
}

static void del(sx_collection *c, int64_t lo, int64_t hi)
{
    int64_t k[16];
    size_t n = 0;
    for (int64_t x = lo; x < hi; x++)
        k[n++] = x;
    sx_keys keys = { n, k, NULL };
    CHECK(sx_delete(c, &keys, NULL));
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    sx_db *db;
    CHECK(sx_db_open(argv[1], NULL, &db));
    sx_field_def f[] = { { "id", SX_FIELD_INT64, true, false, 0, 0 },
                         { "score", SX_FIELD_DOUBLE, false, false, 0, 0 },
                         { "flag", SX_FIELD_BOOL, false, false, 0, 0 },
                         { "tag", SX_FIELD_VARCHAR, false, false, 0, 32 },
                         { "v", SX_FIELD_FLOAT_VECTOR, false, false, 4, 0 } };
    sx_collection_def def = { "legacy", f, 5, SX_METRIC_L2 };
    CHECK(sx_collection_create(db, &def));
    sx_collection *c;
    CHECK(sx_collection_open(db, "legacy", &c));
    put(c, 0, 100);
    CHECK(sx_flush(c));
    sx_param p[] = { { "M", "8" }, { "efConstruction", "32" } };
    CHECK(sx_index_create(c, "HNSW", p, 2));
    CHECK(sx_index_wait(c, 0));
    del(c, 1000, 1010);
    CHECK(sx_flush(c));
    put(c, 100, 150);
    del(c, 1100, 1105);
    del(c, 1010, 1011);
    _exit(0);
}
