/*
 * fuzz_filter.c: libFuzzer harness for the Milvus filter-expression parser and evaluator
 * (src/engine/expr.h). The input is the filter text (cut at the first NUL byte), parsed against a
 * fixed schema with every scalar type (INT64 primary key and field, DOUBLE, BOOL, two VARCHARs and
 * a vector field that expressions may not name); an expression that parses is evaluated on a fixed
 * block of rows holding edge values (INT64 extremes, -0.0, infinities, NaN, empty and non-ASCII
 * strings) and asked for its point-lookup form. age, flag, name and color are nullable, with NULL
 * rows (their NULL bits), so the three-valued paths and `is null` run too. Parse and eval errors
 * are normal outcomes.
 */
#include <math.h>

#include "engine/expr.h"
#include "fuzz_common.h"
#include "util/bitset.h"
#include "util/err.h"

#define N_ROWS 9

static const char *const k_names[] = { "id", "vec", "age", "score", "flag", "name", "color" };
static const sx_field_type k_types[] = { SX_FIELD_INT64,  SX_FIELD_FLOAT_VECTOR, SX_FIELD_INT64,
                                         SX_FIELD_DOUBLE, SX_FIELD_BOOL,         SX_FIELD_VARCHAR,
                                         SX_FIELD_VARCHAR };
#define N_FIELDS (sizeof k_names / sizeof k_names[0])

static int64_t g_id[N_ROWS] = { 0, 1, -1, 42, INT64_MAX, INT64_MIN, 7, 100, 1000 };
static int64_t g_age[N_ROWS] = { 18, 0, -5, 65, INT64_MIN, INT64_MAX, 30, 31, 2 };
static double g_score[N_ROWS];
static bool g_flag[N_ROWS] = { true, false, true, false, true, false, true, true, false };
static const char *const g_name[N_ROWS] = {
    "alice", "", "bob%", "_x_", "caf\xc3\xa9", "a\\b", "\"q\"", "zzzzzzzzzzzzzzzzzzzzzz", "a"
};
/* a few are JSON (arrays, an object) for paths and the json_/array_ functions */
static const char *const g_color[N_ROWS] = { "red", "green", "[1,\"red\",2.5,[3]]", "red_1",
                                             "",    "r%d",   "{\"a\":[true,-0.0]}", "red",
                                             "[]" };

static const bool k_nullable[] = { false, false, true, false, true, true, true };
/* NULL rows: bit r = row r is NULL */
static const uint64_t g_age_nulls[1] = { 0x0A2 };   /* rows 1, 5, 7 */
static const uint64_t g_flag_nulls[1] = { 0x110 };  /* rows 4, 8 */
static const uint64_t g_name_nulls[1] = { 0x003 };  /* rows 0, 1 */
static const uint64_t g_color_nulls[1] = { 0x040 }; /* row 6 */

static sx__expr_schema g_schema;
static sx__colref g_cols[N_FIELDS];

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    double s[N_ROWS] = { 0.5, -0.0, 1e308, -1e308, 3.25, 0.0, 0.0, 0.0, 2.0 };
    s[5] = (double)INFINITY;
    s[6] = -(double)INFINITY;
    s[7] = (double)NAN;
    memcpy(g_score, s, sizeof s);
    g_schema.n_fields = N_FIELDS;
    g_schema.names = k_names;
    g_schema.types = k_types;
    g_schema.nullable = k_nullable;
    g_cols[0] = (sx__colref){ .type = SX_FIELD_INT64, .i64 = g_id };
    g_cols[1] = (sx__colref){ .type = SX_FIELD_FLOAT_VECTOR };
    g_cols[2] = (sx__colref){ .type = SX_FIELD_INT64, .i64 = g_age, .nulls = g_age_nulls };
    g_cols[3] = (sx__colref){ .type = SX_FIELD_DOUBLE, .f64 = g_score };
    g_cols[4] = (sx__colref){ .type = SX_FIELD_BOOL, .b = g_flag, .nulls = g_flag_nulls };
    g_cols[5] = (sx__colref){ .type = SX_FIELD_VARCHAR, .str = g_name, .nulls = g_name_nulls };
    g_cols[6] = (sx__colref){ .type = SX_FIELD_VARCHAR, .str = g_color, .nulls = g_color_nulls };
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *src = malloc(size + 1);
    if (!src)
        return 0;
    memcpy(src, data, size);
    src[size] = 0;
    sx__expr *e = NULL;
    sx_status st = sx__expr_parse(src, &g_schema, &e);
    if (st == SX_OK && e) {
        uint64_t bits[(N_ROWS + 63) / 64 + 1];
        memset(bits, 0xA5, sizeof bits);
        sx__ignore(sx__expr_eval(e, g_cols, N_ROWS, bits));
        /* a block of one row and an empty block: the edges of the word loop */
        sx__ignore(sx__expr_eval(e, g_cols, 1, bits));
        sx__ignore(sx__expr_eval(e, g_cols, 0, bits));
        size_t n = 0;
        const int64_t *ints = NULL;
        const char *const *strs = NULL;
        int f = sx__expr_point_lookup(e, &n, &ints, &strs);
        if (f >= 0) {
            /* touch every literal the lookup hands out: they must be readable */
            volatile size_t sink = 0;
            for (size_t i = 0; i < n; i++)
                sink += ints ? (size_t)ints[i] : strlen(strs[i]);
            (void)sink;
        }
    }
    sx__expr_free(e);
    free(src);
    return 0;
}
