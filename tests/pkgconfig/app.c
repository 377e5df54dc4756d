/*
 * app.c: the smallest program a user of the installed library writes (issue 12, "Linking"). It
 * is compiled by tests/pkgconfig/run.sh with nothing but `pkg-config --cflags --libs [--static]
 * sextant`, so it includes only <sextant.h> and uses only the public API.
 *
 * Usage: app DIR. Opens the database in DIR, creates collection "docs" (int64 key, 8-dim float
 * vector, L2), inserts 200 rows (row i: vec[d] = i + d / 8), flushes, searches the vector of row
 * 123 for the top 3 and checks that row 123 comes first at distance 0, then counts the rows.
 * Prints one line, "pkgconfig app: ..."; exit 0 on success, 1 with the failing call otherwise.
 */
#include <sextant.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DIM  8
#define ROWS 200

static int fail(const char *what, sx_status st)
{
    fprintf(stderr, "pkgconfig app: %s: %s (%s)\n", what, sx_status_str(st), sx_errmsg());
    return 1;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    static int64_t ids[ROWS];
    static float vecs[ROWS * DIM];
    for (int i = 0; i < ROWS; i++) {
        ids[i] = 1000 + i;
        for (int d = 0; d < DIM; d++)
            vecs[i * DIM + d] = (float)i + (float)d / DIM;
    }
    sx_db *db = NULL;
    sx_collection *c = NULL;
    sx_rowset *rs = NULL;
    sx_status st = sx_db_open(argv[1], NULL, &db);
    if (st != SX_OK)
        return fail("sx_db_open", st);
    const sx_field_def f[] = { { .name = "id", .type = SX_FIELD_INT64, .is_primary = true },
                               { .name = "vec", .type = SX_FIELD_FLOAT_VECTOR, .dim = DIM } };
    const sx_collection_def def = { "docs", f, 2, SX_METRIC_L2 };
    int rc = 1;
    st = sx_collection_create(db, &def);
    if (st != SX_OK) {
        rc = fail("sx_collection_create", st);
        goto out;
    }
    st = sx_collection_open(db, "docs", &c);
    if (st != SX_OK) {
        rc = fail("sx_collection_open", st);
        goto out;
    }
    const sx_column cols[] = { { "id", SX_FIELD_INT64, ids },
                               { "vec", SX_FIELD_FLOAT_VECTOR, vecs } };
    const sx_batch batch = { ROWS, cols, 2 };
    st = sx_insert(c, &batch, NULL);
    if (st == SX_OK)
        st = sx_flush(c);
    if (st != SX_OK) {
        rc = fail("sx_insert/sx_flush", st);
        goto out;
    }
    const sx_search_req req = { .queries = vecs + 123 * DIM, .nq = 1, .k = 3, .metric = -1 };
    st = sx_search(c, &req, &rs);
    if (st != SX_OK) {
        rc = fail("sx_search", st);
        goto out;
    }
    uint64_t count = 0;
    st = sx_count(c, NULL, &count);
    if (st != SX_OK) {
        rc = fail("sx_count", st);
        goto out;
    }
    const int64_t top = rs->n_rows ? ((const int64_t *)rs->cols[0].data)[0] : -1;
    if (rs->n_rows != 3 || top != 1123 || rs->distances[0] != 0.0f || count != ROWS) {
        fprintf(stderr, "pkgconfig app: wrong result: %zu hits, top id %lld at %g, %llu rows\n",
                rs->n_rows, (long long)top, rs->n_rows ? (double)rs->distances[0] : -1.0,
                (unsigned long long)count);
        goto out;
    }
    printf("pkgconfig app: sextant %s, %llu rows, top-3 of row 123: %lld %lld %lld\n", sx_version(),
           (unsigned long long)count, (long long)top,
           (long long)((const int64_t *)rs->cols[0].data)[1],
           (long long)((const int64_t *)rs->cols[0].data)[2]);
    rc = 0;
out:
    sx_rowset_free(rs);
    sx_collection_release(c);
    sx_db_close(db);
    return rc;
}
