/*
 * expr.h: Milvus boolean filter expressions (subset of Milvus Plan.g4, see
 * ../shared/reference/milvus-rest-v2.md §9): literals (int: decimal/0x/0b/leading-0 octal, float,
 * strings in "" or '' with C escapes, bools true/True/TRUE/false/..., arrays), comparisons
 * == != < <= > >=, chained ranges (1 < a < 10, 10 >= a > 1), in / not in (also IN / NOT IN),
 * like "prefix%" / "%suffix" / "%infix%" (and '_'), and/or/not (&&, ||, !), parentheses,
 * arithmetic + - * / % inside comparisons on numeric fields, `is null` / `is not null` (always
 * false / true: fields are not nullable yet). Identifiers name schema fields (primary key too);
 * `field["key"][0]` reads a JSON path in a VARCHAR field's text; json_contains(_all/_any) /
 * array_contains(_all/_any) and array_length over such a field or path (docs/internals/FILTER.md).
 *
 * Parse once, evaluate per block of rows into a bitset. Type errors (string compared to a number,
 * unknown field, like on a non-varchar) are reported at parse time.
 * Thread-safety: a parsed sx__expr is immutable; eval may run concurrently.
 */
#ifndef SX_ENGINE_EXPR_H
#define SX_ENGINE_EXPR_H
#include <sextant.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__expr sx__expr;

/* The fields an expression may name: index i is the field's column index for eval. Vector fields
 * may be listed; naming them in an expression is an error. */
typedef struct sx__expr_schema {
    size_t n_fields;
    const char *const *names;
    const sx_field_type *types;
    const bool *nullable; /* per field, or NULL: none is nullable */
} sx__expr_schema;

/* Parses `src`. Errors: SX_EPARSE "cannot parse expression: <what> at position <n>" (0-based byte
 * offset), SX_EINVAL "no field named \"x\" (the fields a filter can use: ...)" / type mismatch,
 * SX_ENOMEM.
 * Ownership: *out is owned, free with sx__expr_free. An empty or all-blank src is SX_EINVAL (the
 * caller treats "" as "no filter" before parsing). */
SX_NODISCARD sx_status sx__expr_parse(const char *src,
                                      const sx__expr_schema *schema,
                                      sx__expr **out);
void sx__expr_free(sx__expr *e);

/* A column block: the pointer matching the field type is set; n rows. bool columns are `bool`. */
typedef struct sx__colref {
    sx_field_type type;
    const int64_t *i64;
    const double *f64;
    const bool *b;
    const char *const *str;
    /* NULL bits of a nullable field (bit i: row i of the block is NULL; read with atomic loads:
     * a growing segment's writer may be setting later rows' bits), or NULL */
    const uint64_t *nulls;
} sx__colref;

/* Evaluates rows [0,n) of the block; sets bit i of `out` for matching rows and clears it for the
 * others (out holds sx__bits_words(n) words, fully written). cols is indexed by field index as in
 * the schema given to parse (entries for fields the expression does not use may be zeroed).
 * Errors: SX_ENOMEM; SX_EINVAL if a column the expression reads is missing or of another type;
 * SX_ETIMEDOUT once the calling thread's deadline (util/deadline.h) has passed (checked per
 * chunk of 1024 rows; out is then partly written). */
SX_NODISCARD sx_status sx__expr_eval(const sx__expr *e,
                                     const sx__colref *cols,
                                     size_t n,
                                     uint64_t *out);

/* If the expression is exactly `<field> == lit` or `<field> in [lits]` on an INT64 or VARCHAR
 * field, returns that field's index and the literals (borrowed from e) for point lookups; else -1.
 */
int sx__expr_point_lookup(const sx__expr *e,
                          size_t *n,
                          const int64_t **ints,
                          const char *const **strs);

#endif
