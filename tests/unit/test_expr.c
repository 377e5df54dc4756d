/*
 * test_expr.c: filter expressions (src/engine/expr.c).
 *
 * Oracle: a per-row reference evaluator written here, independent of the vectorised one: fixed
 * expressions carry a C predicate (X-macro table below), and a seeded random expression
 * generator builds a small tree it both prints (with minimal parentheses, random keyword
 * spellings, random literal bases/escapes) and evaluates row by row with Kleene logic. Both
 * compare the parsed-and-evaluated bitset with the reference over a generated table of 2600 rows
 * (three evaluator chunks), including the tail bits.
 * Also: every literal form, point lookups, error status/position for invalid input, depth and
 * length limits, allocation failure at every step, concurrent evaluation, and a robustness loop
 * (random bytes and mutated valid expressions) that must never crash: run it under ASan+UBSan.
 * Replay a failure with SX_SEED=<seed>.
 */
#include <ctype.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine/expr.h"
#include "harness.h"
#include "util/alloc.h"
#include "util/bitset.h"

/* ------------------------------------------------------------------ the table */

#define NROWS 2600

enum { F_ID, F_A, F_B, F_BIG, F_D, F_PRICE, F_FLAG, F_FLAG2, F_NAME, F_TAG, F_VEC, NF };

static const char *const fnames[NF] = { "id",   "a",     "b",    "big", "d",  "price",
                                        "flag", "flag2", "name", "tag", "vec" };
static const sx_field_type ftypes[NF] = {
    SX_FIELD_INT64,   SX_FIELD_INT64,   SX_FIELD_INT64,        SX_FIELD_INT64,
    SX_FIELD_DOUBLE,  SX_FIELD_DOUBLE,  SX_FIELD_BOOL,         SX_FIELD_BOOL,
    SX_FIELD_VARCHAR, SX_FIELD_VARCHAR, SX_FIELD_FLOAT_VECTOR,
};
static const sx__expr_schema schema = { NF, fnames, ftypes };

typedef struct row {
    int64_t id, a, b, big;
    double d, price;
    bool flag, flag2;
    const char *name, *tag;
} row;

static row rows[NROWS];
static int64_t c_id[NROWS], c_a[NROWS], c_b[NROWS], c_big[NROWS];
static double c_d[NROWS], c_price[NROWS];
static bool c_flag[NROWS], c_flag2[NROWS];
static const char *c_name[NROWS], *c_tag[NROWS];
static char strpool[NROWS][2][8];
static sx__colref cols[NF];
static uint64_t seed0;

static const char *const words[] = { "apple",
                                     "apricot",
                                     "banana",
                                     "",
                                     "red",
                                     "re",
                                     "r\303\251demption",
                                     "\303\274ber",
                                     "a_b",
                                     "a%b",
                                     "x\\y",
                                     "Apple",
                                     "appl",
                                     "mango",
                                     "\346\227\245\346\234\254",
                                     "zz",
                                     "ab",
                                     "a",
                                     "axb",
                                     "pea",
                                     "it's",
                                     "q\"q" };
#define NWORDS (sizeof words / sizeof words[0])

static void make_table(uint64_t seed)
{
    uint64_t s = seed | 1;
    static const int64_t bigs[] = { INT64_MIN,
                                    INT64_MIN + 1,
                                    -1,
                                    0,
                                    1,
                                    2,
                                    3,
                                    -3,
                                    INT64_MAX,
                                    INT64_MAX - 1,
                                    (int64_t)1 << 53,
                                    ((int64_t)1 << 53) + 1,
                                    -((int64_t)1 << 53) - 1,
                                    1000000007 };
    static const double ds[] = { (double)NAN,
                                 (double)INFINITY,
                                 -(double)INFINITY,
                                 -0.0,
                                 0.0,
                                 9007199254740992.0,
                                 9007199254740994.0,
                                 1e300,
                                 2.5,
                                 -2.5,
                                 1.5,
                                 100.0 };
    for (size_t i = 0; i < NROWS; i++) {
        row *r = &rows[i];
        r->id = (int64_t)i * 3 - 1000;
        r->a = (int64_t)(test_rand(&s) % 101) - 50;
        r->b = (int64_t)(test_rand(&s) % 7) - 3;
        if (test_rand(&s) % 3 == 0)
            r->big = bigs[test_rand(&s) % (sizeof bigs / sizeof bigs[0])];
        else
            r->big = (int64_t)test_rand(&s);
        uint64_t k = test_rand(&s) % 20;
        if (k == 0)
            r->d = ds[test_rand(&s) % (sizeof ds / sizeof ds[0])];
        else if (k < 4)
            r->d = (double)((int64_t)(test_rand(&s) % 101) - 50);
        else
            r->d = (double)((int64_t)(test_rand(&s) % 20001) - 10000) / 100.0;
        r->price = (double)(test_rand(&s) % 20000) / 100.0;
        r->flag = test_rand(&s) & 1;
        r->flag2 = test_rand(&s) % 3 == 0;
        for (int w = 0; w < 2; w++) {
            const char *v;
            if (test_rand(&s) % 4 == 0) {
                size_t len = 1 + test_rand(&s) % 6;
                for (size_t j = 0; j < len; j++)
                    strpool[i][w][j] = (char)('a' + test_rand(&s) % 6);
                strpool[i][w][len] = '\0';
                v = strpool[i][w];
            } else {
                v = words[test_rand(&s) % NWORDS];
            }
            if (w == 0)
                r->name = v;
            else
                r->tag = v;
        }
        c_id[i] = r->id;
        c_a[i] = r->a;
        c_b[i] = r->b;
        c_big[i] = r->big;
        c_d[i] = r->d;
        c_price[i] = r->price;
        c_flag[i] = r->flag;
        c_flag2[i] = r->flag2;
        c_name[i] = r->name;
        c_tag[i] = r->tag;
    }
    memset(cols, 0, sizeof cols);
    for (int f = 0; f < NF; f++)
        cols[f].type = ftypes[f];
    cols[F_ID].i64 = c_id;
    cols[F_A].i64 = c_a;
    cols[F_B].i64 = c_b;
    cols[F_BIG].i64 = c_big;
    cols[F_D].f64 = c_d;
    cols[F_PRICE].f64 = c_price;
    cols[F_FLAG].b = c_flag;
    cols[F_FLAG2].b = c_flag2;
    cols[F_NAME].str = c_name;
    cols[F_TAG].str = c_tag;
}

/* ------------------------------------------------------------------ reference helpers */

static int64_t w_add(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static int64_t w_mul(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

/* C truncating division; valid only for b != 0 */
static int64_t r_div(int64_t a, int64_t b)
{
    if (b == -1)
        return (int64_t)(0 - (uint64_t)a);
    return a / b;
}

static int64_t r_mod(int64_t a, int64_t b)
{
    if (b == -1)
        return 0;
    return a % b;
}

/* exact int vs double, via long double (64-bit mantissa on x86-64, quad on aarch64) */
static int cmp_id(int64_t a, double d)
{
    if (isnan(d))
        return 2;
    long double x = (long double)a, y = (long double)d;
    return x < y ? -1 : x > y ? 1 : 0;
}

static int cmp_bytes(const char *a, size_t al, const char *b, size_t bl)
{
    size_t n = al < bl ? al : bl;
    for (size_t k = 0; k < n; k++)
        if (a[k] != b[k])
            return (unsigned char)a[k] < (unsigned char)b[k] ? -1 : 1;
    return al < bl ? -1 : al > bl ? 1 : 0;
}

static int scmp(const char *a, const char *b)
{
    return cmp_bytes(a, strlen(a), b, strlen(b));
}

#define P_ANY (-1)
#define P_ONE (-2)

static bool like_rec(const int *p, size_t pn, const unsigned char *s, size_t sn)
{
    if (pn == 0)
        return sn == 0;
    if (p[0] == P_ANY) {
        for (size_t k = 0; k <= sn; k++)
            if (like_rec(p + 1, pn - 1, s + k, sn - k))
                return true;
        return false;
    }
    if (sn == 0)
        return false;
    if (p[0] == P_ONE) {
        size_t k = 1;
        while (k < sn && (s[k] & 0xc0) == 0x80)
            k++;
        return like_rec(p + 1, pn - 1, s + k, sn - k);
    }
    return p[0] == s[0] && like_rec(p + 1, pn - 1, s + 1, sn - 1);
}

/* `s like pat` where pat holds the decoded pattern bytes (escapes \% \_ \\ still in it) */
static bool r_like(const char *s, const char *pat, size_t plen)
{
    int items[128];
    size_t n = 0;
    for (size_t k = 0; k < plen && n < 128; k++) {
        char c = pat[k];
        if (c == '\\' && k + 1 < plen && strchr("%_\\", pat[k + 1]) && pat[k + 1] != '\0')
            items[n++] = (unsigned char)pat[++k];
        else if (c == '%')
            items[n++] = P_ANY;
        else if (c == '_')
            items[n++] = P_ONE;
        else
            items[n++] = (unsigned char)c;
    }
    return like_rec(items, n, (const unsigned char *)s, strlen(s));
}

static bool lk(const char *s, const char *pat)
{
    return r_like(s, pat, strlen(pat));
}

/* ------------------------------------------------------------------ evaluation helpers */

static uint64_t bits[NROWS / 64 + 2];

static sx_status parse(const char *src, sx__expr **e)
{
    return sx__expr_parse(src, &schema, e);
}

/* parses and evaluates src over the first n rows into `bits`; fails the test on error */
static void eval_src(const char *src, size_t n)
{
    sx__expr *e = NULL;
    sx_status st = parse(src, &e);
    if (st != SX_OK)
        FAILF("parse of <%s> failed: %s %s", src, sx_status_str(st), sx_errmsg());
    memset(bits, 0xa5, sizeof bits);
    st = sx__expr_eval(e, cols, n, bits);
    sx__expr_free(e);
    if (st != SX_OK)
        FAILF("eval of <%s> failed: %s %s", src, sx_status_str(st), sx_errmsg());
    if (n & 63) {
        uint64_t tail = bits[n / 64] >> (n & 63);
        if (tail)
            FAILF("<%s>: bits past row %zu are set", src, n);
    }
}

/* ------------------------------------------------------------------ fixed cases */

#define R     (&rows[i])
#define DIVOK (R->b != 0)

/* X(source, reference predicate over row R) */
#define CASES(X)                                                                                 \
 X("a > 1", R->a > 1)                                                                            \
 X("a >= -5 and a < 7", R->a >= -5 && R->a < 7)                                                  \
 X("1 < a < 10", 1 < R->a && R->a < 10)                                                          \
 X("10 >= a > 1", 10 >= R->a && R->a > 1)                                                        \
 X("-3 <= b <= 2", -3 <= R->b && R->b <= 2)                                                      \
 X("0 < b + a <= a", 0 < R->b + R->a && R->b + R->a <= R->a)                                     \
 X("a == 5 or b == 2", R->a == 5 || R->b == 2)                                                   \
 X("a != 5", R->a != 5)                                                                          \
 X("not (a > 1)", !(R->a > 1))                                                                   \
 X("not a > 1", !(R->a > 1))                                                                     \
 X("NOT a + 1 in [3, 4] and flag", !(R->a + 1 == 3 || R->a + 1 == 4) && R->flag)                 \
 X("!(a > 1) && b < 0", !(R->a > 1) && R->b < 0)                                                 \
 X("not flag == false", R->flag)                                                                 \
 X("not a > 1 == true", !(R->a > 1))                                                             \
 X("-a ** 2 == -(a * a)", true)                                                                  \
 X("a in [1] in [true]", R->a == 1)                                                              \
 X("a > 1 AND b < 0 OR flag", (R->a > 1 && R->b < 0) || R->flag)                                 \
 X("a > 1 and (b < 0 or flag)", R->a > 1 && (R->b < 0 || R->flag))                               \
 X("a > 1 || b < 0 && flag", R->a > 1 || (R->b < 0 && R->flag))                                  \
 X("a in [1, 2, 3, -4]", R->a == 1 || R->a == 2 || R->a == 3 || R->a == -4)                      \
 X("a not in [1, 2, 3]", !(R->a == 1 || R->a == 2 || R->a == 3))                                 \
 X("a IN [1,2,3,]", R->a >= 1 && R->a <= 3)                                                      \
 X("a NOT IN []", true)                                                                          \
 X("a in [ ]", false)                                                                            \
 X("a in [1.0, 2.5, 3]", R->a == 1 || R->a == 3)                                                 \
 X("d in [1, 2.5, -3]", R->d == 1.0 || R->d == 2.5 || R->d == -3.0)                              \
 X("d not in [0]", !(R->d == 0.0))                                                               \
 X("name in [\"apple\", 'banana', \"\"]",                                                        \
   !scmp(R->name, "apple") || !scmp(R->name, "banana") || !scmp(R->name, ""))                    \
 X("name not in [\"apple\"]", scmp(R->name, "apple") != 0)                                       \
 X("id in [-1000, -997, 5, 2, 7000]",                                                            \
   R->id == -1000 || R->id == -997 || R->id == 5 || R->id == 2 || R->id == 7000)                 \
 X("id in [-1000, -997, 5, 2, 7000, 8, 11, 14, 17, 20, 23]",                                     \
   R->id == -1000 || R->id == -997 || R->id == 5 || R->id == 2 || R->id == 7000 || R->id == 8 || \
       R->id == 11 || R->id == 14 || R->id == 17 || R->id == 20 || R->id == 23)                  \
 X("big in [-9223372036854775808, -1, 0, 1, 2, 3, 9223372036854775807, 9007199254740992, "       \
   "1000000007, 5, 6]",                                                                          \
   R->big == INT64_MIN || (R->big >= -1 && R->big <= 3) || R->big == INT64_MAX ||                \
       R->big == (int64_t)1 << 53 || R->big == 1000000007 || R->big == 5 || R->big == 6)         \
 X("b - 3 not in [-6, -5, -4, -3, -2, -1, 0, 1, 2]", false)                                      \
 X("a in [-50, -49, -48, -47, -46, -45, -44, -43, -42, 50, 49]", R->a <= -42 || R->a >= 49)      \
 X("flag", R->flag)                                                                              \
 X("not flag", !R->flag)                                                                         \
 X("flag == true", R->flag)                                                                      \
 X("flag == False", !R->flag)                                                                    \
 X("TRUE != flag", !R->flag)                                                                     \
 X("flag != flag2", R->flag != R->flag2)                                                         \
 X("flag == (a > 0)", R->flag == (R->a > 0))                                                     \
 X("!flag || flag2", !R->flag || R->flag2)                                                       \
 X("true", true)                                                                                 \
 X("false", false)                                                                               \
 X("TRUE and a > 0", R->a > 0)                                                                   \
 X("False or a > 0", R->a > 0)                                                                   \
 X("d > 1.5", R->d > 1.5)                                                                        \
 X("d <= 0", R->d <= 0.0)                                                                        \
 X("not (d > 1.5)", !(R->d > 1.5))                                                               \
 X("d != d", isnan(R->d))                                                                        \
 X("d == d", !isnan(R->d))                                                                       \
 X("a < d", cmp_id(R->a, R->d) == -1)                                                            \
 X("d >= a", cmp_id(R->a, R->d) == -1 || cmp_id(R->a, R->d) == 0)                                \
 X("big != d", cmp_id(R->big, R->d) != 0)                                                        \
 X("price * 0.9 < 100", R->price * 0.9 < 100)                                                    \
 X("price * 2 >= 150.5", R->price * 2 >= 150.5)                                                  \
 X("a % 2 == 0", R->a % 2 == 0)                                                                  \
 X("a % 3 == -1", R->a % 3 == -1)                                                                \
 X("a + 1 == 5", R->a + 1 == 5)                                                                  \
 X("a - b > 0", R->a - R->b > 0)                                                                 \
 X("a * b < -10", R->a * R->b < -10)                                                             \
 X("a / b == 2", DIVOK && R->a / R->b == 2)                                                      \
 X("not (a / b == 2)", DIVOK && !(R->a / R->b == 2))                                             \
 X("a / b == 2 or a > 40", (DIVOK && R->a / R->b == 2) || R->a > 40)                             \
 X("not (a / b == 2 and a > 40)", DIVOK ? !(R->a / R->b == 2 && R->a > 40) : !(R->a > 40))       \
 X("a % b == 1", DIVOK && R->a % R->b == 1)                                                      \
 X("a / 0 == 1", false)                                                                          \
 X("not (a / 0 == 1)", false)                                                                    \
 X("a % 0 != 1", false)                                                                          \
 X("1 / 0 == 1", false)                                                                          \
 X("not (1 / 0 > a)", false)                                                                     \
 X("a / (b - b) == 0 or flag", R->flag)                                                          \
 X("not (a / (b - b) == 0) or flag", R->flag)                                                    \
 X("a / (b - b) in [0] == flag", false)                                                          \
 X("not (a % (b - b) not in [1])", false)                                                        \
 X("a / 2.0 > 3", (double)R->a / 2.0 > 3)                                                        \
 X("a ** 2 > 100", pow((double)R->a, 2) > 100)                                                   \
 X("-a > 3", -R->a > 3)                                                                          \
 X("- -a == a", true)                                                                            \
 X("-(a + 1) < 0", -(R->a + 1) < 0)                                                              \
 X("a + b * 2 == 4", R->a + R->b * 2 == 4)                                                       \
 X("(a + b) * 2 == 4", (R->a + R->b) * 2 == 4)                                                   \
 X("a - -3 == 0", R->a + 3 == 0)                                                                 \
 X("a - 3 - 2 == 0", R->a - 5 == 0)                                                              \
 X("a / 2 * 2 == a", (R->a / 2) * 2 == R->a)                                                     \
 X("price / (a - a) > 0", R->price / (double)(R->a - R->a) > 0)                                  \
 X("big > 0", R->big > 0)                                                                        \
 X("big + 1 < big", R->big == INT64_MAX)                                                         \
 X("big * 2 == 0", w_mul(R->big, 2) == 0)                                                        \
 X("big / -1 == big", R->big == 0 || R->big == INT64_MIN)                                        \
 X("big % -1 == 0", true)                                                                        \
 X("big - 1 > big", R->big == INT64_MIN)                                                         \
 X("-big == big", R->big == 0 || R->big == INT64_MIN)                                            \
 X("big == -9223372036854775808", R->big == INT64_MIN)                                           \
 X("big == -0x8000000000000000", R->big == INT64_MIN)                                            \
 X("big < 9223372036854775807", R->big < INT64_MAX)                                              \
 X("big >= 9.3e18", false)                                                                       \
 X("big < 9.3e18", true)                                                                         \
 X("big > -9.3e18", true)                                                                        \
 X("big == 9007199254740993.0", R->big == (int64_t)1 << 53)                                      \
 X("big < 2.5", R->big <= 2)                                                                     \
 X("big > 2.5", R->big >= 3)                                                                     \
 X("big <= -2.5", R->big <= -3)                                                                  \
 X("big >= -2.5", R->big >= -2)                                                                  \
 X("big != 0.5", true)                                                                           \
 X("big == 2.0", R->big == 2)                                                                    \
 X("big + 0 != 0.5 or big / b > 0", true)                                                        \
 X("big / b != 0.5", DIVOK)                                                                      \
 X("big in [1.0, 2.5, 9007199254740992.0]", R->big == 1 || R->big == (int64_t)1 << 53)           \
 X("d < 9007199254740993", cmp_id(((int64_t)1 << 53) + 1, R->d) == 1)                            \
 X("d == 9007199254740993", false)                                                               \
 X("d >= 9007199254740992",                                                                      \
   cmp_id((int64_t)1 << 53, R->d) == -1 || cmp_id((int64_t)1 << 53, R->d) == 0)                  \
 X("d in [9007199254740993, 9007199254740994]", R->d == 9007199254740994.0)                      \
 X("name == \"apple\"", !scmp(R->name, "apple"))                                                 \
 X("name != 'apple'", scmp(R->name, "apple") != 0)                                               \
 X("name < \"b\"", scmp(R->name, "b") < 0)                                                       \
 X("name >= \"apricot\"", scmp(R->name, "apricot") >= 0)                                         \
 X("\"m\" < name", scmp("m", R->name) < 0)                                                       \
 X("name > \"a\\0b\"", cmp_bytes(R->name, strlen(R->name), "a\0b", 3) > 0)                       \
 X("name == \"a\\0\"", false)                                                                    \
 X("name == tag", !scmp(R->name, R->tag))                                                        \
 X("name < tag", scmp(R->name, R->tag) < 0)                                                      \
 X("\"a\" <= name < \"b\"", scmp(R->name, "a") >= 0 && scmp(R->name, "b") < 0)                   \
 X("name like \"ap%\"", lk(R->name, "ap%"))                                                      \
 X("name like \"%an%\"", lk(R->name, "%an%"))                                                    \
 X("name like \"%e\"", lk(R->name, "%e"))                                                        \
 X("name like \"a_b\"", lk(R->name, "a_b"))                                                      \
 X("name like \"a\\\\_b\"", !scmp(R->name, "a_b"))                                               \
 X("name like \"a\\\\%b\"", !scmp(R->name, "a%b"))                                               \
 X("name like \"x\\\\\\\\y\"", !scmp(R->name, "x\\y"))                                           \
 X("name like \"%\"", true)                                                                      \
 X("name like \"%%\"", true)                                                                     \
 X("name like \"\"", !scmp(R->name, ""))                                                         \
 X("name like \"_\"", lk(R->name, "_"))                                                          \
 X("name like \"__\"", lk(R->name, "__"))                                                        \
 X("name like \"r_d%\"", lk(R->name, "r_d%"))                                                    \
 X("name like \"%p_e%\"", lk(R->name, "%p_e%"))                                                  \
 X("name like \"%a%n%\"", lk(R->name, "%a%n%"))                                                  \
 X("name like \"%a%a\"", lk(R->name, "%a%a"))                                                    \
 X("name like \"a\\0%\"", false)                                                                 \
 X("name LIKE 'A%'", lk(R->name, "A%"))                                                          \
 X("not name like \"a%\"", !lk(R->name, "a%"))                                                   \
 X("name like \"ap%\" == false", !lk(R->name, "ap%"))                                            \
 X("name is null", false)                                                                        \
 X("name is not null", true)                                                                     \
 X("a IS NOT NULL and a > 3", R->a > 3)                                                          \
 X("flag is null or flag", R->flag)                                                              \
 X("r\"apple\" == name", !scmp(R->name, "apple"))                                                \
 X("name == 'x\\\\y'", !scmp(R->name, "x\\y"))                                                   \
 X("name == r'x\\y'", !scmp(R->name, "x\\y"))                                                    \
 X("name == \"\\u00fcber\"", !scmp(R->name, "\xc3\xbc"                                           \
                                            "ber"))                                              \
 X("name == \"\\xc3\\xbc\\142er\"", !scmp(R->name, "\xc3\xbc"                                    \
                                                   "ber"))                                       \
 X("name == \"\\303\\274ber\"", !scmp(R->name, "\xc3\xbc"                                        \
                                               "ber"))                                           \
 X("name == 'it\\'s' or name == \"q\\\"q\"", !scmp(R->name, "it's") || !scmp(R->name, "q\"q"))   \
 X("a == 0x1f or a == 0b101 or a == 017 or a == -0X0A",                                          \
   R->a == 31 || R->a == 5 || R->a == 15 || R->a == -10)                                         \
 X("a in [0x1F, 0B11, 010, 1e1, .5e1]",                                                          \
   R->a == 31 || R->a == 3 || R->a == 8 || R->a == 10 || R->a == 5)                              \
 X("price > 1e2 and price < 1.5E2", R->price > 100 && R->price < 150)                            \
 X("(((a > 1)))", R->a > 1)                                                                      \
 X("a > 1 == true", R->a > 1)                                                                    \
 X("a > 1 != (b > 1)", (R->a > 1) != (R->b > 1))                                                 \
 X("a\n>\t1\r\n", R->a > 1)                                                                      \
 X("flag and flag2 and a > 0 and b < 0 and name != \"\"",                                        \
   R->flag && R->flag2 && R->a > 0 && R->b < 0 && R->name[0])                                    \
 X("a in [1,2] == false", !(R->a == 1 || R->a == 2))                                             \
 X("a + 1 in [2, 3]", R->a + 1 == 2 || R->a + 1 == 3)                                            \
 X("(a > 0) in [true]", R->a > 0)                                                                \
 X("(a > 0) not in [true, false]", false)                                                        \
 X("flag in [false]", !R->flag)                                                                  \
 X("1 < 2", true)                                                                                \
 X("\"a\" < \"b\"", true)                                                                        \
 X("'abc' == \"abc\"", true)                                                                     \
 X("\"a\\0\" > \"a\"", true)                                                                     \
 X("1 == 1.0 and 1 < 1.5 and 2 > 1.5", true)                                                     \
 X("9007199254740993 == 9007199254740992.0", false)                                              \
 X("0.1 + 0.2 == 0.3", false)                                                                    \
 X("5 % 3 == 2 and -5 % 3 == -2 and 7 / -2 == -3", true)                                         \
 X("2 ** -1 == 0.5 and 2 ** 3 ** 2 == 64 and -2 ** 2 == -4", true)                               \
 X("-9223372036854775808 / -1 == -9223372036854775808", true)                                    \
 X("3 in [1, 2.0, 3.0]", true)                                                                   \
 X("'b' not in ['a', 'c']", true)                                                                \
 X("'ab' like 'a%' and not 'ab' like '_'", true)                                                 \
 X("true == (1 < 2)", true)

#define SRC(s, e) s,
static const char *const case_src[] = { CASES(SRC) };
#define NCASES (sizeof case_src / sizeof case_src[0])

static bool case_ref(size_t k, size_t i)
{
    size_t idx = 0;
#define REF(s, e) \
 if (k == idx++)  \
  return (e);
    CASES(REF)
#undef REF
    (void)i;
    return false;
}

static void check_case(size_t k, size_t n)
{
    eval_src(case_src[k], n);
    for (size_t i = 0; i < n; i++) {
        bool want = case_ref(k, i), got = sx__bits_test(bits, i);
        if (want != got)
            FAILF("<%s> row %zu (a=%" PRId64 " b=%" PRId64 " big=%" PRId64
                  " d=%.17g name=\"%s\"): got %d want %d",
                  case_src[k], i, rows[i].a, rows[i].b, rows[i].big, rows[i].d, rows[i].name, got,
                  want);
    }
}

static void test_fixed_cases(void)
{
    for (size_t k = 0; k < NCASES; k++)
        check_case(k, NROWS);
    fprintf(stderr, "     %zu fixed expressions\n", NCASES);
}

static void test_block_sizes(void)
{
    static const size_t ns[] = { 1, 2, 63, 64, 65, 127, 1000, 1023, 1024, 1025, 2047, 2049 };
    for (size_t j = 0; j < sizeof ns / sizeof ns[0]; j++)
        for (size_t k = 0; k < NCASES; k += 3)
            check_case(k, ns[j]);
    /* n == 0 writes nothing */
    sx__expr *e;
    ASSERT_OK(parse("a > 1", &e));
    uint64_t w = 0x1234;
    ASSERT_OK(sx__expr_eval(e, cols, 0, &w));
    ASSERT_EQ(w, 0x1234);
    sx__expr_free(e);
}

/* ------------------------------------------------------------------ literal forms */

static void expect_int_lit(const char *lit, int64_t want)
{
    char src[256];
    snprintf(src, sizeof src, "id == %s", lit);
    sx__expr *e = NULL;
    sx_status st = parse(src, &e);
    if (st != SX_OK)
        FAILF("<%s>: %s", src, sx_errmsg());
    size_t n = 0;
    const int64_t *ints = NULL;
    const char *const *strs = NULL;
    int f = sx__expr_point_lookup(e, &n, &ints, &strs);
    bool ok = f == F_ID && n == 1 && ints && !strs && ints[0] == want;
    int64_t got = ints ? ints[0] : 0;
    sx__expr_free(e);
    if (!ok)
        FAILF("<%s>: field %d n %zu value %" PRId64 ", want %" PRId64, src, f, n, got, want);
}

static void expect_str_lit(const char *lit, const char *want, size_t want_len)
{
    char src[256];
    snprintf(src, sizeof src, "name == %s", lit);
    sx__expr *e = NULL;
    sx_status st = parse(src, &e);
    if (st != SX_OK)
        FAILF("<%s>: %s", src, sx_errmsg());
    size_t n = 0;
    const int64_t *ints = NULL;
    const char *const *strs = NULL;
    int f = sx__expr_point_lookup(e, &n, &ints, &strs);
    bool ok = f == F_NAME && n == 1 && strs && !ints && strlen(strs[0]) == want_len &&
              memcmp(strs[0], want, want_len) == 0;
    sx__expr_free(e);
    if (!ok)
        FAILF("<%s>: string literal decoded wrong (field %d, n %zu)", src, f, n);
}

static void expect_dbl_lit(const char *lit, double want)
{
    /* one row holding `want` and its neighbours: only the exact value matches */
    double vals[3] = { nextafter(want, -(double)INFINITY), want,
                       nextafter(want, (double)INFINITY) };
    sx__colref c[NF];
    memcpy(c, cols, sizeof c);
    c[F_D].f64 = vals;
    char src[256];
    snprintf(src, sizeof src, "d == %s", lit);
    sx__expr *e = NULL;
    sx_status st = parse(src, &e);
    if (st != SX_OK)
        FAILF("<%s>: %s", src, sx_errmsg());
    uint64_t w = 0;
    st = sx__expr_eval(e, c, 3, &w);
    sx__expr_free(e);
    ASSERT_OK(st);
    if (w != 2)
        FAILF("<%s>: float literal decoded wrong (bits %#" PRIx64 ")", src, w);
}

static void test_literals(void)
{
    static const struct {
        const char *lit;
        int64_t v;
    } ints[] = {
        { "0", 0 },
        { "00", 0 },
        { "7", 7 },
        { "0x1F", 31 },
        { "0X1f", 31 },
        { "0xffffffff", 4294967295 },
        { "0b101", 5 },
        { "0B0", 0 },
        { "017", 15 },
        { "0777", 511 },
        { "-5", -5 },
        { "- 5", -5 },
        { "+7", 7 },
        { "--7", 7 },
        { "(3)", 3 },
        { "1 + 2 * 3", 7 },
        { "2.0", 2 },
        { "-2e0", -2 },
        { "9223372036854775807", INT64_MAX },
        { "-9223372036854775808", INT64_MIN },
        { "0x7FFFFFFFFFFFFFFF", INT64_MAX },
        { "-0x8000000000000000", INT64_MIN },
        { "-0b1000000000000000000000000000000000000000000000000000000000000000", INT64_MIN },
        { "-01000000000000000000000", INT64_MIN },
        { "9223372036854775807 + 1", INT64_MIN },
        { "7 % -3", 1 },
        { "-7 / 2", -3 },
    };

    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++)
        expect_int_lit(ints[k].lit, ints[k].v);

    static const struct {
        const char *lit;
        double v;
    } dbls[] = {
        { "1.5", 1.5 },
        { ".5", 0.5 },
        { "5.", 5.0 },
        { "1e-3", 1e-3 },
        { "1E3", 1000.0 },
        { "1.5e+2", 150.0 },
        { "-2.25", -2.25 },
        { "0.1", 0.1 },
        { "1.e1", 10.0 },
        { "00.5", 0.5 },
        { "1e-400", 0.0 },
        { "1e308", 1e308 },
        { "2 ** 0.5", 1.4142135623730951 },
        { "7 / 2.0", 3.5 },
        { "-0.0", 0.0 },
        { "4.9406564584124654e-324", 4.9406564584124654e-324 },
    };

    for (size_t k = 0; k < sizeof dbls / sizeof dbls[0]; k++)
        expect_dbl_lit(dbls[k].lit, dbls[k].v);

    static const struct {
        const char *lit, *v;
        size_t len;
    } strs[] = {
        { "\"abc\"", "abc", 3 },
        { "'abc'", "abc", 3 },
        { "\"\"", "", 0 },
        { "''", "", 0 },
        { "\"a\\tb\"", "a\tb", 3 },
        { "\"\\a\\b\\f\\n\\r\\t\\v\\\\\\'\\\"\\?\"", "\a\b\f\n\r\t\v\\'\"?", 11 },
        { "'it\\'s'", "it's", 4 },
        { "\"it's\"", "it's", 4 },
        { "'say \"hi\"'", "say \"hi\"", 8 },
        { "\"\\101\\x42\\u0043\"", "ABC", 3 },
        { "\"\\1012\"", "A2", 2 },
        { "\"\\x4a\\x004\"", "J\x04", 2 },
        { "\"\\U0001F600\"", "\xf0\x9f\x98\x80", 4 },
        { "\"\\u00e9\"", "\xc3\xa9", 2 },
        { "\"\\u20AC\"", "\xe2\x82\xac", 3 },
        { "r\"a\\nb\"", "a\\nb", 4 },
        { "R'a\\'b'", "a\\'b", 4 },
        { "r''", "", 0 },
        { "\"\\d\\%\"", "\\d\\%", 4 },
        { "\"a\\\nb\"", "ab", 2 },
        { "\"a\\\r\nb\"", "ab", 2 },
        { "u8\"x\"", "x", 1 },
        { "L'x'", "x", 1 },
        { "\"\xe6\x97\xa5\xe6\x9c\xac\"", "\xe6\x97\xa5\xe6\x9c\xac", 6 },
        { "\"tab\there\"", "tab\there", 8 },
    };

    for (size_t k = 0; k < sizeof strs / sizeof strs[0]; k++)
        expect_str_lit(strs[k].lit, strs[k].v, strs[k].len);

    /* a literal with a NUL byte can never equal a column string: n == 0 */
    sx__expr *e;
    size_t n = 9;
    const int64_t *pi;
    const char *const *ps;
    ASSERT_OK(parse("name == \"a\\0b\"", &e));
    ASSERT_EQ(sx__expr_point_lookup(e, &n, &pi, &ps), F_NAME);
    ASSERT_EQ(n, 0);
    sx__expr_free(e);

    static const char *const trues[] = { "true", "True", "TRUE" };
    static const char *const falses[] = { "false", "False", "FALSE" };
    char src[64];
    for (size_t k = 0; k < 3; k++) {
        snprintf(src, sizeof src, "flag == %s", trues[k]);
        eval_src(src, NROWS);
        for (size_t i = 0; i < NROWS; i++)
            ASSERT_EQ(sx__bits_test(bits, i), rows[i].flag);
        snprintf(src, sizeof src, "%s != flag", falses[k]);
        eval_src(src, NROWS);
        for (size_t i = 0; i < NROWS; i++)
            ASSERT_EQ(sx__bits_test(bits, i), rows[i].flag);
        snprintf(src, sizeof src, "%s", falses[k]);
        eval_src(src, NROWS);
        for (size_t i = 0; i < NROWS; i++)
            ASSERT_EQ(sx__bits_test(bits, i), 0);
    }
}

static void test_point_lookup(void)
{
    static const struct {
        const char *src;
        int field;
        size_t n;
        int64_t v0, v1;
        const char *s0, *s1;
    } cs[] = {
        { "id == 5", F_ID, 1, 5, 0, NULL, NULL },
        { "5 == id", F_ID, 1, 5, 0, NULL, NULL },
        { "(id == 2.0)", F_ID, 1, 2, 0, NULL, NULL },
        { "id in [3, 1, 2, 3,]", F_ID, 3, 1, 2, NULL, NULL },
        { "id in [7]", F_ID, 1, 7, 0, NULL, NULL },
        { "id in []", F_ID, 0, 0, 0, NULL, NULL },
        { "a == -1", F_A, 1, -1, 0, NULL, NULL },
        { "name in ['b', \"a\", 'b']", F_NAME, 2, 0, 0, "a", "b" },
        { "name == 'x'", F_NAME, 1, 0, 0, "x", NULL },
        { "tag == \"\"", F_TAG, 1, 0, 0, "", NULL },
        { "id == 5 and a > 1", -1, 0, 0, 0, NULL, NULL },
        { "id not in [1]", -1, 0, 0, 0, NULL, NULL },
        { "id != 1", -1, 0, 0, 0, NULL, NULL },
        { "id > 5", -1, 0, 0, 0, NULL, NULL },
        { "id == 2.5", -1, 0, 0, 0, NULL, NULL },
        { "d == 1.0", -1, 0, 0, 0, NULL, NULL },
        { "flag", -1, 0, 0, 0, NULL, NULL },
        { "id + 1 == 5", -1, 0, 0, 0, NULL, NULL },
        { "true", -1, 0, 0, 0, NULL, NULL },
    };

    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        sx__expr *e;
        ASSERT_OK(parse(cs[k].src, &e));
        size_t n = 99;
        const int64_t *ints = NULL;
        const char *const *strs = NULL;
        int f = sx__expr_point_lookup(e, &n, &ints, &strs);
        bool ok = f == cs[k].field;
        if (ok && f >= 0) {
            ok = n == cs[k].n;
            if (ok && ftypes[f] == SX_FIELD_INT64) {
                ok = ints && !strs && (n < 1 || ints[0] == cs[k].v0) &&
                     (n < 2 || ints[1] == cs[k].v1);
            } else if (ok) {
                ok = strs && !ints && (n < 1 || !strcmp(strs[0], cs[k].s0)) &&
                     (n < 2 || !strcmp(strs[1], cs[k].s1));
            }
        }
        sx__expr_free(e);
        if (!ok)
            FAILF("point lookup of <%s>: field %d n %zu", cs[k].src, f, n);
    }
}

/* ------------------------------------------------------------------ invalid input */

static void expect_error(const char *src, sx_status want, long pos)
{
    sx__expr *e = (sx__expr *)(uintptr_t)0x1;
    sx_status st = parse(src, &e);
    if (st != want)
        FAILF("<%s>: got %s (%s), want %s", src, sx_status_str(st), sx_errmsg(),
              sx_status_str(want));
    if (e != (sx__expr *)(uintptr_t)0x1)
        FAILF("<%s>: *out written on failure", src);
    const char *msg = sx_errmsg();
    if (want == SX_EPARSE && strncmp(msg, "cannot parse expression: ", 25) != 0)
        FAILF("<%s>: message \"%s\" lacks the prefix", src, msg);
    if (pos >= 0) {
        char tail[64];
        snprintf(tail, sizeof tail, " at position %ld", pos);
        size_t ml = strlen(msg), tl = strlen(tail);
        if (ml < tl || strcmp(msg + ml - tl, tail) != 0)
            FAILF("<%s>: message \"%s\" does not end with \"%s\"", src, msg, tail);
    }
}

static void test_errors(void)
{
    static const struct {
        const char *src;
        sx_status st;
        long pos;
    } cs[] = {
        { "(a > 1", SX_EPARSE, 6 },
        { "a > 1)", SX_EPARSE, 5 },
        { "((a > 1)", SX_EPARSE, 8 },
        { "(a > 1]", SX_EPARSE, 6 },
        { "()", SX_EPARSE, 1 },
        { "a >", SX_EPARSE, 3 },
        { "a > > 1", SX_EPARSE, 4 },
        { "a # 1", SX_EPARSE, 2 },
        { "a > 1 @", SX_EPARSE, 6 },
        { "a > 1 \x80", SX_EPARSE, 6 },
        { "a > 1 b", SX_EPARSE, 6 },
        { "a.b > 1", SX_EPARSE, 1 },
        { "and", SX_EPARSE, 0 },
        { "a > 1 and", SX_EPARSE, 9 },
        { "a = 1", SX_EPARSE, 2 },
        { "a & 1 > 0", SX_EPARSE, 2 },
        { "a | 1 > 0", SX_EPARSE, 2 },
        { "a ^ 1 > 0", SX_EPARSE, 2 },
        { "a << 1 > 0", SX_EPARSE, 2 },
        { "a >> 1 > 0", SX_EPARSE, 2 },
        { "~a > 0", SX_EPARSE, 0 },
        { "name =~ 'x'", SX_EPARSE, 5 },
        { "{min} < a", SX_EPARSE, 0 },
        { "a > {min}", SX_EPARSE, 4 },
        { "$meta[\"x\"] == 1", SX_EPARSE, 0 },
        { "meta[\"x\"] == 1", SX_EINVAL, 0 }, /* no field "meta" */
        { "id[\"x\"] == 1", SX_EINVAL, 2 },   /* [...] on a non-VARCHAR field */
        { "name[\"a\"] == name[\"b\"]", SX_EINVAL, 10 },
        { "name[\"a\" == 1", SX_EPARSE, -1 },
        { "name[] == 1", SX_EPARSE, 5 },
        { "name[1.5] == 1", SX_EPARSE, 5 },
        { "array_contains(a, 1)", SX_EINVAL, 15 }, /* a is INT64, not an ARRAY/JSON field */
        { "random_sample(0.1)", SX_EPARSE, 0 },
        { "a > 1 and exists name", SX_EINVAL, 17 }, /* name is not a JSON path */
        { "a > 0x", SX_EPARSE, 4 },
        { "a > 0b2", SX_EPARSE, 4 },
        { "a > 09", SX_EPARSE, 4 },
        { "a > 1e", SX_EPARSE, 4 },
        { "a > 1e+", SX_EPARSE, 4 },
        { "a > 1.2.3", SX_EPARSE, 4 },
        { "a > 12abc", SX_EPARSE, 4 },
        { "a > 0x1.8p1", SX_EPARSE, 4 },
        { "a > 18446744073709551616", SX_EPARSE, 4 },
        { "a > 9223372036854775808", SX_EPARSE, 4 },
        { "a > -9223372036854775809", SX_EPARSE, 5 },
        { "a > -(9223372036854775808)", SX_EPARSE, 6 },
        { "-9223372036854775808 ** 1 > a", SX_EPARSE, 1 },
        { "d > 1e999", SX_EPARSE, 4 },
        { "name == \"abc", SX_EPARSE, 8 },
        { "name == 'abc", SX_EPARSE, 8 },
        { "name == r'abc", SX_EPARSE, 8 },
        { "name == \"ab\nc\"", SX_EPARSE, 8 },
        { "name == \"abc\\", SX_EPARSE, 8 },
        { "name == \"\\x\"", SX_EPARSE, 9 },
        { "name == \"\\x100\"", SX_EPARSE, 9 },
        { "name == \"\\u12\"", SX_EPARSE, 9 },
        { "name == \"\\ud800\"", SX_EPARSE, 9 },
        { "name == \"\\U00110000\"", SX_EPARSE, 9 },
        { "name == \"\\777\"", SX_EPARSE, 9 },
        { "a is nul", SX_EPARSE, 5 },
        { "a is not", SX_EPARSE, 8 },
        { "1 is null", SX_EPARSE, 2 },
        { "a in", SX_EPARSE, 4 },
        { "a not 1", SX_EPARSE, 2 },
        { "a in [1,,2]", SX_EPARSE, 8 },
        { "a in [1 2]", SX_EPARSE, 8 },
        { "a in [1", SX_EPARSE, 7 },
        { "a in [,]", SX_EPARSE, 6 },
        { "a > 1 < 5", SX_EPARSE, 6 },
        { "zz > 1", SX_EINVAL, 0 },
        { "a > 1 and zz", SX_EINVAL, 10 },
        { "a > 1 and zz is null", SX_EINVAL, 10 },
        { "name > 1", SX_EINVAL, 5 },
        { "name == 1", SX_EINVAL, 5 },
        { "1 == name", SX_EINVAL, 2 },
        { "name in [1]", SX_EINVAL, 9 },
        { "a in [\"x\"]", SX_EINVAL, 6 },
        { "a in ['x', 1]", SX_EINVAL, 6 },
        { "flag in [1]", SX_EINVAL, 9 },
        { "a like \"x%\"", SX_EINVAL, 2 },
        { "flag like \"x%\"", SX_EINVAL, 5 },
        { "name like 5", SX_EINVAL, 10 },
        { "name like tag", SX_EINVAL, 10 },
        { "a == []", SX_EINVAL, 5 },
        { "[] == a", SX_EINVAL, 0 },
        { "[]", SX_EINVAL, 0 },
        { "[1, 2]", SX_EINVAL, 0 },
        { "a in [1, [2]]", SX_EINVAL, 9 },
        { "a in [b]", SX_EINVAL, 6 },
        { "a in [b > 1]", SX_EINVAL, 6 },
        { "a in 5", SX_EINVAL, 5 },
        { "a in a", SX_EINVAL, 5 },
        { "[1] in [1]", SX_EINVAL, 0 },
        { "a + [1] > 0", SX_EINVAL, 4 },
        { "vec > 1", SX_EINVAL, 0 },
        { "vec is null", SX_EINVAL, 0 },
        { "a", SX_EINVAL, 0 },
        { "a + 1", SX_EINVAL, 0 },
        { "'x'", SX_EINVAL, 0 },
        { "1", SX_EINVAL, 0 },
        { "flag < true", SX_EINVAL, 5 },
        { "flag >= flag2", SX_EINVAL, 5 },
        { "flag + 1 > 0", SX_EINVAL, 5 },
        { "not a", SX_EINVAL, 0 },
        { "not name", SX_EINVAL, 0 },
        { "! a + 1", SX_EINVAL, 0 },
        { "a and flag", SX_EINVAL, 0 },
        { "flag or 1", SX_EINVAL, 8 },
        { "flag && name", SX_EINVAL, 8 },
        { "-name == 'x'", SX_EINVAL, 0 },
        { "+flag", SX_EINVAL, 0 },
        { "-flag", SX_EINVAL, 0 },
        { "name * 2 > 1", SX_EINVAL, 5 },
        { "1 < a < 5 < 7", SX_EINVAL, 10 },
        { "a == 1 == 2", SX_EINVAL, 7 },
        { "d > 'x'", SX_EINVAL, 2 },
        { "'x' < 1", SX_EINVAL, 4 },
        { "name == flag", SX_EINVAL, 5 },
        { "", SX_EINVAL, -1 },
        { "   \t\n", SX_EINVAL, -1 },
    };

    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++)
        expect_error(cs[k].src, cs[k].st, cs[k].pos);
}

static char *repeat(const char *pre, size_t n, const char *mid, const char *post)
{
    size_t pl = strlen(pre), ml = strlen(mid), ql = strlen(post);
    char *s = sx__malloc(n * (pl + ql) + ml + 1);
    if (!s)
        abort();
    size_t o = 0;
    for (size_t k = 0; k < n; k++, o += pl)
        memcpy(s + o, pre, pl);
    memcpy(s + o, mid, ml);
    o += ml;
    for (size_t k = 0; k < n; k++, o += ql)
        memcpy(s + o, post, ql);
    s[o] = '\0';
    return s;
}

static void expect_ok(const char *src)
{
    sx__expr *e = NULL;
    sx_status st = parse(src, &e);
    if (st != SX_OK)
        FAILF("<%.60s...> (%zu bytes): %s", src, strlen(src), sx_errmsg());
    ASSERT_OK(sx__expr_eval(e, cols, NROWS, bits));
    sx__expr_free(e);
}

static void test_limits(void)
{
    char *s;
    s = repeat("(", 256, "a > 1", ")");
    expect_ok(s);
    sx__free(s);
    s = repeat("(", 257, "a > 1", ")");
    expect_error(s, SX_EPARSE, 256);
    sx__free(s);
    s = repeat("(", 100000, "", "");
    expect_error(s, SX_EPARSE, 65536);
    sx__free(s);
    s = repeat("(", 20000, "", "");
    expect_error(s, SX_EPARSE, 256);
    sx__free(s);
    s = repeat("not ", 255, "flag", "");
    expect_ok(s);
    sx__free(s);
    s = repeat("not ", 257, "flag", "");
    expect_error(s, SX_EPARSE, 256 * 4);
    sx__free(s);
    s = repeat("-", 300, "a > 0", "");
    expect_error(s, SX_EPARSE, 256);
    sx__free(s);
    s = repeat("[", 300, "1", "]");
    expect_error(s, SX_EPARSE, 256);
    sx__free(s);
    s = repeat("a + ", 200, "a > 0", "");
    expect_ok(s);
    sx__free(s);
    s = repeat("a + ", 300, "a > 0", "");
    expect_error(s, SX_EPARSE, -1);
    sx__free(s);
    s = repeat("1 + ", 5000, "a > 0", ""); /* constants fold: no depth */
    expect_ok(s);
    sx__free(s);
    /* long and/or chains are n-ary: no depth, and must evaluate right */
    {
        size_t cap = 5000 * 24, o = 0;
        char *q = sx__malloc(cap);
        if (!q)
            abort();
        for (int k = 0; k < 4000; k++)
            o += (size_t)snprintf(q + o, cap - o, "%sa == %d", k ? " or " : "", k - 25);
        eval_src(q, NROWS);
        for (size_t i = 0; i < NROWS; i++)
            ASSERT_EQ(sx__bits_test(bits, i), rows[i].a >= -25);
        o = 0;
        for (int k = 0; k < 3000; k++)
            o += (size_t)snprintf(q + o, cap - o, "%sa != %d", k ? " && " : "", k - 25);
        eval_src(q, NROWS);
        for (size_t i = 0; i < NROWS; i++)
            ASSERT_EQ(sx__bits_test(bits, i), rows[i].a < -25);
        sx__free(q);
    }
    /* a big in-list */
    {
        size_t cap = 8000 * 12, o = 0;
        char *q = sx__malloc(cap);
        if (!q)
            abort();
        o += (size_t)snprintf(q, cap, "id in [");
        for (int k = 0; k < 8000; k++)
            o += (size_t)snprintf(q + o, cap - o, "%d,", k * 7 - 1000);
        snprintf(q + o, cap - o, "]");
        eval_src(q, NROWS);
        for (size_t i = 0; i < NROWS; i++) {
            int64_t v = rows[i].id + 1000;
            ASSERT_EQ(sx__bits_test(bits, i), v % 7 == 0 && v / 7 < 8000);
        }
        sx__free(q);
    }
    /* length: 65536 bytes is fine, 65537 is not */
    s = repeat(" ", 65536 - 5, "a > 1", "");
    ASSERT_EQ(strlen(s), 65536);
    expect_ok(s);
    sx__free(s);
    s = repeat(" ", 65537 - 5, "a > 1", "");
    expect_error(s, SX_EPARSE, 65536);
    sx__free(s);
}

/* ------------------------------------------------------------------ random expressions */

enum { TY_INT, TY_DBL, TY_STR, TY_BOOL };

enum {
    G_FIELD,
    G_INT,
    G_DBL,
    G_STR,
    G_BOOL,
    G_NEG,
    G_ARITH,
    G_CMP,
    G_RANGE,
    G_IN,
    G_LIKE,
    G_NOT,
    G_AND,
    G_OR,
    G_ISNULL
};

enum { GO_EQ, GO_NE, GO_LT, GO_LE, GO_GT, GO_GE };

enum { GA_ADD, GA_SUB, GA_MUL, GA_DIV, GA_MOD, GA_POW };

typedef struct gn gn;

struct gn {
    int kind, type, op, op2;
    int field;
    int64_t i;
    double d;
    bool bv, neg;
    char s[24]; /* string literal bytes (may hold NUL), or like pattern */
    size_t slen;
    gn *a, *b, *c;
    gn *list[6];
    int n_list;
};

#define GPOOL 4096
static gn gpool[GPOOL];
static size_t gused;
static uint64_t grs;

static unsigned rnd(unsigned n)
{
    return (unsigned)(test_rand(&grs) % n);
}

static gn *gnew(int kind, int type)
{
    if (gused == GPOOL)
        abort();
    gn *g = &gpool[gused++];
    memset(g, 0, sizeof *g);
    g->kind = kind;
    g->type = type;
    return g;
}

static gn *gen_num(int depth);
static gn *gen_bool(int depth);

static gn *gen_int_lit(void)
{
    static const int64_t sp[] = { 0,  1,   -1,        2,         3,       7,
                                  -7, 100, INT64_MAX, INT64_MIN, 1 << 30, ((int64_t)1 << 53) + 1 };
    gn *g = gnew(G_INT, TY_INT);
    g->i = rnd(3) ? (int64_t)rnd(61) - 30 : sp[rnd(sizeof sp / sizeof sp[0])];
    return g;
}

static gn *gen_dbl_lit(void)
{
    static const double sp[] = { 0.5, -0.5, 1.5, 2.5, 100.0, 1e-3, 1e300, 9007199254740992.0,
                                 0.1, 3.0 };
    gn *g = gnew(G_DBL, TY_DBL);
    g->d = rnd(2) ? (double)((int)rnd(4001) - 2000) / 40.0 : sp[rnd(sizeof sp / sizeof sp[0])];
    if (g->d == 0)
        g->d = 0.25;
    return g;
}

static gn *gen_num(int depth)
{
    unsigned k = rnd(depth > 0 ? 10 : 6);
    if (k < 3) {
        static const int nf[] = { F_A, F_B, F_BIG, F_ID, F_D, F_PRICE, F_A, F_D };
        int f = nf[rnd(8)];
        gn *g = gnew(G_FIELD, ftypes[f] == SX_FIELD_INT64 ? TY_INT : TY_DBL);
        g->field = f;
        return g;
    }
    if (k < 5)
        return gen_int_lit();
    if (k < 6)
        return gen_dbl_lit();
    if (k < 7) {
        gn *a = gen_num(depth - 1);
        gn *g = gnew(G_NEG, a->type);
        g->a = a;
        return g;
    }
    gn *a = gen_num(depth - 1), *b = gen_num(depth - 1);
    int op = (int)rnd(16);
    op = op < 4    ? GA_ADD
         : op < 7  ? GA_SUB
         : op < 10 ? GA_MUL
         : op < 12 ? GA_DIV
         : op < 15 ? GA_MOD
                   : GA_POW;
    gn *g =
        gnew(G_ARITH, (op == GA_POW || a->type == TY_DBL || b->type == TY_DBL) ? TY_DBL : TY_INT);
    g->op = op;
    g->a = a;
    g->b = b;
    return g;
}

static gn *gen_str(void)
{
    if (rnd(2)) {
        gn *g = gnew(G_FIELD, TY_STR);
        g->field = rnd(3) ? F_NAME : F_TAG;
        return g;
    }
    gn *g = gnew(G_STR, TY_STR);
    if (rnd(3)) {
        const char *w = words[rnd(NWORDS)];
        g->slen = strlen(w);
        memcpy(g->s, w, g->slen);
    } else {
        g->slen = rnd(5);
        for (size_t k = 0; k < g->slen; k++) {
            unsigned c = rnd(20);
            g->s[k] = c == 0   ? '\0'
                      : c == 1 ? '\n'
                      : c == 2 ? '\\'
                      : c == 3 ? '\''
                      : c == 4 ? '"'
                      : c == 5 ? (char)0xc3
                               : (char)('a' + rnd(6));
        }
    }
    return g;
}

static gn *gen_like(void)
{
    static const char *const pieces[] = { "%",  "%",  "_",   "a",   "p", "e",        "r",
                                          "an", "ap", "\\%", "\\_", "x", "\xc3\xa9", "b" };
    gn *g = gnew(G_LIKE, TY_BOOL);
    gn *f = gnew(G_FIELD, TY_STR);
    f->field = rnd(3) ? F_NAME : F_TAG;
    g->a = f;
    unsigned np = rnd(5);
    for (unsigned k = 0; k < np; k++) {
        const char *pc = pieces[rnd(sizeof pieces / sizeof pieces[0])];
        size_t pl = strlen(pc);
        if (g->slen + pl >= sizeof g->s)
            break;
        memcpy(g->s + g->slen, pc, pl);
        g->slen += pl;
    }
    return g;
}

static gn *gen_bool(int depth)
{
    unsigned k = rnd(depth > 0 ? 16 : 9);
    gn *g;
    switch (k) {
    case 0:
        g = gnew(G_FIELD, TY_BOOL);
        g->field = rnd(2) ? F_FLAG : F_FLAG2;
        return g;
    case 1:
        if (rnd(3))
            return gen_bool(depth);
        g = gnew(G_BOOL, TY_BOOL);
        g->bv = rnd(2);
        return g;
    case 2:
    case 3:
        g = gnew(G_CMP, TY_BOOL);
        g->op = (int)rnd(6);
        g->a = gen_num(depth);
        g->b = gen_num(depth);
        return g;
    case 4:
        g = gnew(G_CMP, TY_BOOL);
        g->op = (int)rnd(6);
        g->a = gen_str();
        g->b = gen_str();
        return g;
    case 5:
        g = gnew(G_RANGE, TY_BOOL);
        g->op = rnd(2) ? GO_LT + (int)rnd(2) : GO_GT + (int)rnd(2);
        g->op2 = g->op <= GO_LE ? GO_LT + (int)rnd(2) : GO_GT + (int)rnd(2);
        g->a = rnd(2) ? gen_int_lit() : gen_dbl_lit();
        g->b = gen_num(depth > 0 ? depth - 1 : 0);
        g->c = rnd(2) ? gen_int_lit() : gen_dbl_lit();
        return g;
    case 6:
        g = gnew(G_IN, TY_BOOL);
        g->neg = rnd(2);
        if (rnd(3)) {
            g->a = gen_num(depth > 0 ? depth - 1 : 0);
            g->n_list = (int)rnd(6);
            for (int j = 0; j < g->n_list; j++)
                g->list[j] = rnd(3) ? gen_int_lit() : gen_dbl_lit();
        } else {
            g->a = gen_str();
            g->n_list = (int)rnd(5);
            for (int j = 0; j < g->n_list; j++) {
                gn *s;
                do {
                    s = gen_str();
                } while (s->kind != G_STR);
                g->list[j] = s;
            }
        }
        return g;
    case 7:
        return gen_like();
    case 8:
        g = gnew(G_ISNULL, TY_BOOL);
        g->field = (int)rnd(F_VEC);
        g->neg = rnd(2);
        return g;
    case 9:
    case 10:
        g = gnew(G_NOT, TY_BOOL);
        g->a = gen_bool(depth - 1);
        return g;
    case 11:
        g = gnew(G_CMP, TY_BOOL);
        g->op = (int)rnd(2);
        g->a = gen_bool(depth - 1);
        g->b = gen_bool(depth - 1);
        return g;
    case 12:
    case 13:
        g = gnew(G_AND, TY_BOOL);
        g->a = gen_bool(depth - 1);
        g->b = gen_bool(depth - 1);
        return g;
    default:
        g = gnew(G_OR, TY_BOOL);
        g->a = gen_bool(depth - 1);
        g->b = gen_bool(depth - 1);
        return g;
    }
}

/* ---- printing */

typedef struct gbuf {
    char s[16384];
    size_t n;
} gbuf;

static void put(gbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(gbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(b->s + b->n, sizeof b->s - b->n, fmt, ap);
    va_end(ap);
    if (k < 0 || (size_t)k >= sizeof b->s - b->n)
        abort();
    b->n += (size_t)k;
}

static void put_uint(gbuf *b, uint64_t v)
{
    switch (rnd(4)) {
    case 0:
        put(b, "0x%" PRIx64, v);
        break;
    case 1:
        if (v < ((uint64_t)1 << 20)) {
            char d[70];
            int n = 0;
            uint64_t x = v;
            do {
                d[n++] = (char)('0' + (x & 1));
                x >>= 1;
            } while (x);
            put(b, "0b");
            while (n)
                put(b, "%c", d[--n]);
            break;
        }
        /* fall through */
    case 2:
        put(b, "0%" PRIo64, v);
        break;
    default:
        put(b, "%" PRIu64, v);
        break;
    }
}

static void put_dbl(gbuf *b, double d)
{
    char t[64];
    snprintf(t, sizeof t, "%.17g", d < 0 ? -d : d);
    if (!strpbrk(t, ".e"))
        memcpy(t + strlen(t), ".0", 3);
    put(b, "%s%s", d < 0 ? "-" : "", t);
}

static void put_str(gbuf *b, const char *s, size_t len)
{
    char q = rnd(2) ? '"' : '\'';
    bool plain = true;
    for (size_t k = 0; k < len; k++)
        if (s[k] == '\\' || s[k] == q || s[k] == '\n' || s[k] == '\0')
            plain = false;
    if (plain && rnd(4) == 0) {
        put(b, "%c%c%.*s%c", rnd(2) ? 'r' : 'R', q, (int)len, s, q);
        return;
    }
    put(b, "%c", q);
    for (size_t k = 0; k < len; k++) {
        unsigned char c = (unsigned char)s[k];
        bool next_hex = k + 1 < len && isxdigit((unsigned char)s[k + 1]);
        bool next_oct = k + 1 < len && s[k + 1] >= '0' && s[k + 1] <= '7';
        if (c == '\\' || c == (unsigned char)q)
            put(b, "\\%c", c);
        else if (c == '\n')
            put(b, "\\n");
        else if (c == 0)
            put(b, next_oct ? "\\000" : "\\0");
        else if (rnd(6) == 0 && !next_hex)
            put(b, "\\x%02x", c);
        else if (rnd(6) == 0)
            put(b, "\\%03o", c);
        else if (c < 0x80 && rnd(8) == 0)
            put(b, "\\u%04x", c);
        else
            put(b, "%c", c);
    }
    put(b, "%c", q);
}

static const char *const gops[] = { "==", "!=", "<", "<=", ">", ">=" };
static const char *const aops[] = { "+", "-", "*", "/", "%", "**" };

#define PR_ATOM 100

static int gprec(const gn *g)
{
    switch (g->kind) {
    case G_INT:
        return g->i < 0 ? 12 : PR_ATOM;
    case G_DBL:
        return g->d < 0 ? 12 : PR_ATOM;
    case G_NEG:
    case G_NOT:
        return 12;
    case G_ARITH:
        return g->op == GA_POW ? 13 : g->op <= GA_SUB ? 10 : 11;
    case G_CMP:
        return g->op <= GO_NE ? 6 : 7;
    case G_RANGE:
        return 7;
    case G_IN:
        return 8;
    case G_LIKE:
        return 14;
    case G_AND:
        return 2;
    case G_OR:
        return 1;
    default:
        return PR_ATOM;
    }
}

static void gprint(gbuf *b, const gn *g, int follow);

/* Prints child c of an operator of precedence prec; right: c is its right operand; follow: the
 * precedence of the operator printed right after c (0: none). A prefix operator's operand takes
 * every following operator that binds tighter than unary (`**`, like), as in Milvus's grammar,
 * so a prefix child followed by one needs parentheses. */
static void gchild(gbuf *b, const gn *c, int prec, bool right, int follow)
{
    int cp = gprec(c);
    bool prefix = cp == 12;
    bool par = right ? (cp <= prec && !prefix) : cp < prec;
    if (prec == 7 && cp == 7) /* relational operators chain: never leave them bare */
        par = true;
    if (prec == 12 && !prefix && cp < 13)
        par = true;
    if (prefix && follow >= 13)
        par = true;
    if (rnd(12) == 0)
        par = true;
    if (par) {
        put(b, "(");
        gprint(b, c, 0);
        put(b, ")");
    } else {
        gprint(b, c, follow);
    }
}

static void gprint(gbuf *b, const gn *g, int follow)
{
    int pr = gprec(g);
    switch (g->kind) {
    case G_FIELD:
        put(b, "%s", fnames[g->field]);
        break;
    case G_INT:
        if (g->i < 0)
            put(b, "-%s", rnd(3) ? "" : " ");
        put_uint(b, g->i < 0 ? 0 - (uint64_t)g->i : (uint64_t)g->i);
        break;
    case G_DBL:
        put_dbl(b, g->d);
        break;
    case G_STR:
        put_str(b, g->s, g->slen);
        break;
    case G_BOOL: {
        static const char *const t[] = { "true", "True", "TRUE" }, *const f[] = { "false", "False",
                                                                                  "FALSE" };
        put(b, "%s", g->bv ? t[rnd(3)] : f[rnd(3)]);
        break;
    }
    case G_NEG:
        put(b, "- ");
        gchild(b, g->a, 12, false, follow);
        break;
    case G_NOT: {
        static const char *const t[] = { "not ", "NOT ", "!" };
        put(b, "%s", t[rnd(3)]);
        gchild(b, g->a, 12, false, follow);
        break;
    }
    case G_ARITH:
        gchild(b, g->a, pr, false, pr);
        put(b, " %s ", aops[g->op]);
        gchild(b, g->b, pr, true, follow);
        break;
    case G_CMP:
        gchild(b, g->a, pr, false, pr);
        put(b, " %s ", gops[g->op]);
        gchild(b, g->b, pr, true, follow);
        break;
    case G_RANGE:
        gchild(b, g->a, 7, false, 7);
        put(b, " %s ", gops[g->op]);
        gchild(b, g->b, 7, true, 7);
        put(b, " %s ", gops[g->op2]);
        gchild(b, g->c, 7, true, follow);
        break;
    case G_IN: {
        static const char *const in[] = { " in ", " IN " }, *const nin[] = { " not in ",
                                                                             " NOT IN " };
        gchild(b, g->a, 8, false, 8);
        put(b, "%s[", g->neg ? nin[rnd(2)] : in[rnd(2)]);
        for (int j = 0; j < g->n_list; j++) {
            if (j)
                put(b, ",%s", rnd(2) ? " " : "");
            gprint(b, g->list[j], 0);
        }
        put(b, "%s]", g->n_list && rnd(4) == 0 ? "," : "");
        break;
    }
    case G_LIKE:
        gchild(b, g->a, 14, false, 14);
        put(b, " %s ", rnd(2) ? "like" : "LIKE");
        put_str(b, g->s, g->slen);
        break;
    case G_AND: {
        static const char *const t[] = { " and ", " AND ", " && " };
        gchild(b, g->a, 2, false, 2);
        put(b, "%s", t[rnd(3)]);
        gchild(b, g->b, 2, true, follow);
        break;
    }
    case G_OR: {
        static const char *const t[] = { " or ", " OR ", " || " };
        gchild(b, g->a, 1, false, 1);
        put(b, "%s", t[rnd(3)]);
        gchild(b, g->b, 1, true, follow);
        break;
    }
    default: /* G_ISNULL */
        put(b, "%s %s", fnames[g->field],
            g->neg ? (rnd(2) ? "is not null" : "IS NOT NULL") : (rnd(2) ? "is null" : "IS NULL"));
        break;
    }
}

/* ---- reference evaluation (Kleene: 0 false, 1 true, 2 unknown) */

typedef struct rv {
    bool ok; /* false: invalid (integer division by zero) */
    bool is_int;
    int64_t i;
    double d;
} rv;

static rv geval_num(const gn *g, const row *r)
{
    rv v = { true, true, 0, 0 };
    switch (g->kind) {
    case G_FIELD: {
        static const size_t off[NF] = {
            offsetof(row, id),  offsetof(row, a), offsetof(row, b),
            offsetof(row, big), offsetof(row, d), offsetof(row, price)
        };
        if (g->type == TY_INT)
            memcpy(&v.i, (const char *)r + off[g->field], sizeof v.i);
        else {
            v.is_int = false;
            memcpy(&v.d, (const char *)r + off[g->field], sizeof v.d);
        }
        return v;
    }
    case G_INT:
        v.i = g->i;
        return v;
    case G_DBL:
        v.is_int = false;
        v.d = g->d;
        return v;
    case G_NEG:
        v = geval_num(g->a, r);
        if (v.is_int)
            v.i = (int64_t)(0 - (uint64_t)v.i);
        else
            v.d = -v.d;
        return v;
    default: { /* G_ARITH */
        rv a = geval_num(g->a, r), b = geval_num(g->b, r);
        v.ok = a.ok && b.ok;
        if (g->op != GA_POW && a.is_int && b.is_int) {
            switch (g->op) {
            case GA_ADD:
                v.i = w_add(a.i, b.i);
                break;
            case GA_SUB:
                v.i = (int64_t)((uint64_t)a.i - (uint64_t)b.i);
                break;
            case GA_MUL:
                v.i = w_mul(a.i, b.i);
                break;
            case GA_DIV:
                if (b.i == 0)
                    v.ok = false;
                else
                    v.i = r_div(a.i, b.i);
                break;
            default:
                if (b.i == 0)
                    v.ok = false;
                else
                    v.i = r_mod(a.i, b.i);
                break;
            }
            return v;
        }
        double x = a.is_int ? (double)a.i : a.d, y = b.is_int ? (double)b.i : b.d;
        v.is_int = false;
        switch (g->op) {
        case GA_ADD:
            v.d = x + y;
            break;
        case GA_SUB:
            v.d = x - y;
            break;
        case GA_MUL:
            v.d = x * y;
            break;
        case GA_DIV:
            v.d = x / y;
            break;
        case GA_MOD:
            v.d = fmod(x, y);
            break;
        default:
            v.d = pow(x, y);
            break;
        }
        return v;
    }
    }
}

/* -1/0/1, 2 unordered */
static int rcmp_num(rv a, rv b)
{
    if (a.is_int && b.is_int)
        return a.i < b.i ? -1 : a.i > b.i ? 1 : 0;
    if (a.is_int)
        return cmp_id(a.i, b.d);
    if (b.is_int) {
        int c = cmp_id(b.i, a.d);
        return c == 2 ? 2 : -c;
    }
    if (isnan(a.d) || isnan(b.d))
        return 2;
    return a.d < b.d ? -1 : a.d > b.d ? 1 : 0;
}

static bool holds(int op, int c)
{
    switch (op) {
    case GO_EQ:
        return c == 0;
    case GO_NE:
        return c != 0;
    case GO_LT:
        return c == -1;
    case GO_LE:
        return c == -1 || c == 0;
    case GO_GT:
        return c == 1;
    default:
        return c == 1 || c == 0;
    }
}

static void geval_str(const gn *g, const row *r, const char **s, size_t *len)
{
    if (g->kind == G_FIELD) {
        *s = g->field == F_NAME ? r->name : r->tag;
        *len = strlen(*s);
    } else {
        *s = g->s;
        *len = g->slen;
    }
}

static int geval(const gn *g, const row *r);

static int rcmp_tri(int op, int a, int b)
{
    if (a == 2 || b == 2)
        return 2;
    return (op == GO_EQ) == (a == b);
}

static int geval(const gn *g, const row *r)
{
    switch (g->kind) {
    case G_FIELD:
        return g->field == F_FLAG ? r->flag : r->flag2;
    case G_BOOL:
        return g->bv;
    case G_CMP:
        if (g->a->type == TY_BOOL)
            return rcmp_tri(g->op, geval(g->a, r), geval(g->b, r));
        if (g->a->type == TY_STR) {
            const char *x, *y;
            size_t xl, yl;
            geval_str(g->a, r, &x, &xl);
            geval_str(g->b, r, &y, &yl);
            return holds(g->op, cmp_bytes(x, xl, y, yl));
        } else {
            rv a = geval_num(g->a, r), b = geval_num(g->b, r);
            if (!a.ok || !b.ok)
                return 2;
            return holds(g->op, rcmp_num(a, b));
        }
    case G_RANGE: {
        rv lo = geval_num(g->a, r), x = geval_num(g->b, r), hi = geval_num(g->c, r);
        if (!x.ok)
            return 2;
        return holds(g->op, rcmp_num(lo, x)) && holds(g->op2, rcmp_num(x, hi));
    }
    case G_IN: {
        bool hit = false;
        if (g->a->type == TY_STR) {
            const char *x;
            size_t xl;
            geval_str(g->a, r, &x, &xl);
            for (int j = 0; j < g->n_list; j++)
                hit = hit || cmp_bytes(x, xl, g->list[j]->s, g->list[j]->slen) == 0;
        } else {
            rv x = geval_num(g->a, r);
            if (!x.ok)
                return 2;
            for (int j = 0; j < g->n_list; j++)
                hit = hit || rcmp_num(x, geval_num(g->list[j], r)) == 0;
        }
        return hit != g->neg;
    }
    case G_LIKE: {
        const char *x;
        size_t xl;
        geval_str(g->a, r, &x, &xl);
        return r_like(x, g->s, g->slen);
    }
    case G_ISNULL:
        return g->neg;
    case G_NOT: {
        int v = geval(g->a, r);
        return v == 2 ? 2 : !v;
    }
    case G_AND: {
        int a = geval(g->a, r), b = geval(g->b, r);
        if (a == 0 || b == 0)
            return 0;
        return a == 2 || b == 2 ? 2 : 1;
    }
    default: { /* G_OR */
        int a = geval(g->a, r), b = geval(g->b, r);
        if (a == 1 || b == 1)
            return 1;
        return a == 2 || b == 2 ? 2 : 0;
    }
    }
}

static size_t gen_expr(uint64_t s, gbuf *b, gn **root)
{
    grs = s | 1;
    gused = 0;
    b->n = 0;
    b->s[0] = '\0';
    *root = gen_bool(1 + (int)rnd(4));
    gprint(b, *root, 0);
    return b->n;
}

static void test_random_expressions(void)
{
    uint64_t seed = seed0 ^ 0x5eedull;
    static gbuf b;
    int n_expr = 3000;
    bool verbose = getenv("SX_EXPR_VERBOSE") != NULL;
    size_t n_trivial = 0;
    for (int k = 0; k < n_expr; k++) {
        uint64_t s = seed + (uint64_t)k * 0x9e3779b97f4a7c15ull;
        gn *root;
        gen_expr(s, &b, &root);
        sx__expr *e = NULL;
        sx_status st = parse(b.s, &e);
        if (st != SX_OK)
            FAILF("random #%d <%s>: %s %s", k, b.s, sx_status_str(st), sx_errmsg());
        st = sx__expr_eval(e, cols, NROWS, bits);
        sx__expr_free(e);
        ASSERT_OK(st);
        for (size_t i = 0; i < NROWS; i++) {
            bool want = geval(root, &rows[i]) == 1, got = sx__bits_test(bits, i);
            if (want != got)
                FAILF("random #%d <%s> row %zu (a=%" PRId64 " b=%" PRId64 " big=%" PRId64
                      " id=%" PRId64 " d=%.17g price=%.17g name=\"%s\" tag=\"%s\" flag=%d "
                      "flag2=%d): got %d want %d",
                      k, b.s, i, rows[i].a, rows[i].b, rows[i].big, rows[i].id, rows[i].d,
                      rows[i].price, rows[i].name, rows[i].tag, rows[i].flag, rows[i].flag2, got,
                      want);
        }
        size_t hits = sx__bits_count(bits, NROWS);
        n_trivial += hits == 0 || hits == NROWS;
        if (verbose)
            fprintf(stderr, "     %5zu  %s\n", hits, b.s);
    }
    fprintf(stderr, "     %d random expressions (%zu match no row or every row)\n", n_expr,
            n_trivial);
}

/* ------------------------------------------------------------------ robustness */

static void check_any(const char *src, size_t len)
{
    sx__expr *e = NULL;
    sx_status st = parse(src, &e);
    if (st == SX_OK) {
        if (sx__expr_eval(e, cols, 300, bits) != SX_OK)
            FAILF("eval failed on <%s>", src);
        sx__expr_free(e);
        return;
    }
    if (st != SX_EPARSE && st != SX_EINVAL)
        FAILF("<%s>: unexpected status %s", src, sx_status_str(st));
    const char *msg = sx_errmsg();
    const char *at = strstr(msg, " at position ");
    if (st == SX_EPARSE && strncmp(msg, "cannot parse expression: ", 25) != 0)
        FAILF("<%s>: message \"%s\"", src, msg);
    bool blank = strspn(src, " \t\r\n") == len;
    if (!blank) {
        if (!at)
            FAILF("<%s>: message \"%s\" has no position", src, msg);
        unsigned long pos = strtoul(at + 13, NULL, 10);
        if (pos > len)
            FAILF("<%s>: position %lu past the end (%zu)", src, pos, len);
    }
}

static void test_robustness(void)
{
    uint64_t s = seed0 ^ 0xf00dull;
    static const char alpha[] = "abdfgilmnoprstx_ ()[],.'\"\\<>=!&|+-*/%~^{}$0123456789eE\n\t#";
    static const char *const toks[] = {
        " and ",    " or ", " not ", " in ", " like ", " is null",
        " not in ", "(",    ")",     "[",    "]",      ",",
        "\"",       "'",    "\\",    "==",   "<",      "<=",
        ">=",       "!",    "-",     "**",   "%",      "/",
        "0x",       "0b",   "1e",    ".",    "r\"",    "9223372036854775808",
        "name",     "vec",  "flag",  "zz",   "[]",     "{x}",
        "$meta",    "\\u",  "\\x",   "\xff", "\xc3",   "1e999",
        "true",     "TRUE", "is",    "null",
    };
    char buf[512];
    int n_random = 6000, n_mut = 12000;
    for (int k = 0; k < n_random; k++) {
        size_t len = test_rand(&s) % 64;
        for (size_t j = 0; j < len; j++) {
            uint64_t r = test_rand(&s);
            buf[j] =
                (r & 7) == 0 ? (char)(1 + (r >> 8) % 255) : alpha[(r >> 8) % (sizeof alpha - 1)];
        }
        buf[len] = '\0';
        check_any(buf, len);
    }
    static gbuf b;
    for (int k = 0; k < n_mut; k++) {
        gn *root;
        size_t len = gen_expr(test_rand(&s), &b, &root);
        if (len >= sizeof buf - 64)
            continue;
        memcpy(buf, b.s, len + 1);
        int muts = 1 + (int)(test_rand(&s) % 4);
        for (int m = 0; m < muts && len > 0; m++) {
            size_t at = test_rand(&s) % len;
            switch (test_rand(&s) % 5) {
            case 0: { /* delete a run */
                size_t dl = 1 + test_rand(&s) % 4;
                if (at + dl > len)
                    dl = len - at;
                memmove(buf + at, buf + at + dl, len - at - dl + 1);
                len -= dl;
                break;
            }
            case 1: { /* insert a token */
                const char *t = toks[test_rand(&s) % (sizeof toks / sizeof toks[0])];
                size_t tl = strlen(t);
                if (len + tl >= sizeof buf)
                    break;
                memmove(buf + at + tl, buf + at, len - at + 1);
                memcpy(buf + at, t, tl);
                len += tl;
                break;
            }
            case 2: /* replace a byte */
                buf[at] = alpha[test_rand(&s) % (sizeof alpha - 1)];
                break;
            case 3: /* truncate */
                len = at;
                buf[len] = '\0';
                break;
            default: { /* duplicate a run */
                size_t dl = 1 + test_rand(&s) % 8;
                if (at + dl > len)
                    dl = len - at;
                if (len + dl >= sizeof buf)
                    break;
                memmove(buf + at + dl, buf + at, len - at + 1);
                len += dl;
                break;
            }
            }
        }
        check_any(buf, len);
    }
    fprintf(stderr, "     %d random byte strings, %d mutated expressions\n", n_random, n_mut);
}

/* ------------------------------------------------------------------ allocation failure */

static void test_oom(void)
{
    static const char *const srcs[] = {
        "a > 1 and (b < 0 or name like 'a%b_') and id in [1, 2, 3] and not flag",
        "a / b + price * 2 > 1 or name in ['x', 'y'] or 1 < d < 5 or tag like '%x%'",
    };
    for (size_t k = 0; k < sizeof srcs / sizeof srcs[0]; k++) {
        bool done = false;
        for (long fail = 1; fail < 10000 && !done; fail++) {
            sx__expr *e = NULL;
            sx__alloc_fail_after(fail);
            sx_status st = parse(srcs[k], &e);
            if (st == SX_OK)
                st = sx__expr_eval(e, cols, NROWS, bits);
            sx__alloc_fail_after(0);
            sx__expr_free(e);
            if (st == SX_OK)
                done = true;
            else if (st != SX_ENOMEM)
                FAILF("<%s> with allocation %ld failing: %s", srcs[k], fail, sx_status_str(st));
        }
        ASSERT(done);
    }
}

/* ------------------------------------------------------------------ concurrency */

typedef struct tjob {
    const sx__expr *e;
    uint64_t out[NROWS / 64 + 1];
    sx_status st;
} tjob;

static void *tmain(void *arg)
{
    tjob *j = arg;
    for (int k = 0; k < 50 && j->st == SX_OK; k++)
        j->st = sx__expr_eval(j->e, cols, NROWS, j->out);
    return NULL;
}

static void test_concurrent_eval(void)
{
    sx__expr *e;
    ASSERT_OK(parse("a / b > 2 or name like '%a%' and price * 2 < 150 and not flag", &e));
    eval_src("a / b > 2 or name like '%a%' and price * 2 < 150 and not flag", NROWS);
    static tjob jobs[4];
    pthread_t th[4];
    for (int k = 0; k < 4; k++) {
        jobs[k].e = e;
        jobs[k].st = SX_OK;
        ASSERT_EQ(pthread_create(&th[k], NULL, tmain, &jobs[k]), 0);
    }
    for (int k = 0; k < 4; k++)
        ASSERT_EQ(pthread_join(th[k], NULL), 0);
    sx__expr_free(e);
    for (int k = 0; k < 4; k++) {
        ASSERT_OK(jobs[k].st);
        ASSERT_EQ(memcmp(jobs[k].out, bits, sizeof jobs[k].out), 0);
    }
}

/* ------------------------------------------------------------------ API misuse */

static void test_misuse(void)
{
    sx__expr *e;
    ASSERT_STATUS(sx__expr_parse(NULL, &schema, &e), SX_EINVAL);
    ASSERT_STATUS(sx__expr_parse("a > 1", NULL, &e), SX_EINVAL);
    sx__expr_free(NULL);
    ASSERT_EQ(sx__expr_point_lookup(NULL, NULL, NULL, NULL), -1);
    /* a used column missing from the block is an error, not a crash */
    ASSERT_OK(parse("a > 1 and name == 'x'", &e));
    sx__colref c[NF];
    memcpy(c, cols, sizeof c);
    c[F_NAME].str = NULL;
    ASSERT_STATUS(sx__expr_eval(e, c, 10, bits), SX_EINVAL);
    /* unused columns may be zeroed */
    memset(c, 0, sizeof c);
    c[F_A] = cols[F_A];
    c[F_NAME] = cols[F_NAME];
    ASSERT_OK(sx__expr_eval(e, c, NROWS, bits));
    sx__expr_free(e);
}

/* An unknown field is named, with the fields a filter can use (no vector field), and the
 * position; a schema with many long names is listed cut, never overflowing the message. */
/* JSON paths on a VARCHAR column holding JSON text: typed by their use, rows without a value of
 * that type at the path are UNKNOWN (neither the predicate nor its negation matches). */
/* One filter over the docs of test_json_paths' shape: parse, eval, compare with want (bit i =
 * row i). */
static void check_rows(const sx__expr_schema *js,
                       const sx__colref *jc,
                       size_t n,
                       const char *src,
                       const uint64_t *want)
{
    sx__expr *e = NULL;
    sx_status st = sx__expr_parse(src, js, &e);
    if (st != SX_OK) {
        FAILF("<%s>: %s", src, sx_errmsg());
        return;
    }
    size_t nw = (n + 63) / 64;
    uint64_t *out = malloc(nw * sizeof *out);
    ASSERT(out != NULL);
    memset(out, 0xff, nw * sizeof *out);
    st = sx__expr_eval(e, jc, n, out);
    sx__expr_free(e);
    if (st != SX_OK) {
        FAILF("<%s>: eval %s", src, sx_errmsg());
    } else {
        for (size_t i = 0; i < n; i++) {
            bool got = (out[i / 64] >> (i % 64)) & 1, w = (want[i / 64] >> (i % 64)) & 1;
            if (got != w) {
                FAILF("<%s>: row %zu %s, want %s", src, i, got ? "matches" : "does not match",
                      w ? "a match" : "no match");
                break;
            }
        }
    }
    free(out);
}

static void test_json_paths(void)
{
    static const char *const docs[] = {
        "{\"lang\":\"ja\",\"n\":3,\"tags\":[\"a\",\"b\"],\"ok\":true,\"sub\":{\"x\":1.5}}",
        "{\"lang\":\"en\",\"n\":10,\"ok\":false}",
        "{\"lang\":5}",
        "not json",
        "",
        "{\"n\":\"3\",\"sub\":{\"x\":2}}",
        "[1,2,3]",
        "{\"lang\":\"ja\",\"n\":-1}",
    };

    enum { ND = sizeof docs / sizeof docs[0] };

    static const char *const names[2] = { "id", "doc" };
    static const sx_field_type types[2] = { SX_FIELD_INT64, SX_FIELD_VARCHAR };
    const sx__expr_schema js = { 2, names, types };
    int64_t ids[ND];
    for (int i = 0; i < ND; i++)
        ids[i] = i;
    sx__colref jc[2];
    memset(jc, 0, sizeof jc);
    jc[0].type = SX_FIELD_INT64;
    jc[0].i64 = ids;
    jc[1].type = SX_FIELD_VARCHAR;
    jc[1].str = docs;

    static const struct {
        const char *src;
        unsigned want; /* bit i: row i matches */
    } cs[] = {
        { "doc[\"lang\"] == \"ja\"", 0x81 },
        { "not (doc[\"lang\"] == \"ja\")", 0x02 },
        { "doc[\"lang\"] != 'ja'", 0x02 },
        { "doc[\"n\"] > 2", 0x03 },
        { "doc[\"n\"] + 1 == 4", 0x01 },
        { "doc[\"sub\"][\"x\"] >= 1.5", 0x21 },
        { "doc[\"tags\"][1] == \"b\"", 0x01 },
        { "doc[\"tags\"][2] == \"b\"", 0x00 },
        { "doc[\"ok\"]", 0x01 },
        { "not doc[\"ok\"]", 0x02 },
        { "doc[\"ok\"] == false", 0x02 },
        { "doc[\"lang\"] in [\"ja\", \"en\"]", 0x83 },
        { "doc[\"lang\"] not in [\"ja\"]", 0x02 },
        { "doc[\"n\"] in [3, 10]", 0x03 },
        { "doc[\"lang\"] like \"j%\"", 0x81 },
        { "doc[\"n\"] > 2 and id < 1", 0x01 },
        { "doc[\"n\"] > 2 or doc[\"lang\"] == \"ja\"", 0x83 },
        { "doc[0] == 1", 0x40 },
        { "-doc[\"n\"] == 1", 0x80 },
        { "id == doc[\"n\"]", 0x00 },
        { "doc[\"n\"] < id + 4", 0x81 },
    };

    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        uint64_t want = cs[k].want;
        check_rows(&js, jc, ND, cs[k].src, &want);
    }
}

/* json_contains / array_contains (_all, _any) and array_length: fixed cases with Milvus's
 * semantics, then random arrays (over several chunks) against a model that never parses JSON. */
static void test_json_functions(void)
{
    static const char *const docs[] = {
        "[1,2,3]",
        "[\"a\",\"b\"]",
        "[]",
        "{\"tags\":[\"x\",\"y\"],\"n\":[1.5,2],\"k\":7}",
        "not json",
        "",
        "[1.0,true,\"1\"]",
        "[[1],2]",
    };

    enum { ND = sizeof docs / sizeof docs[0] };

    static const char *const names[3] = { "id", "arr", "v" };
    static const sx_field_type types[3] = { SX_FIELD_INT64, SX_FIELD_VARCHAR,
                                            SX_FIELD_FLOAT_VECTOR };
    const sx__expr_schema js = { 3, names, types };
    int64_t ids[ND];
    for (int i = 0; i < ND; i++)
        ids[i] = i;
    sx__colref jc[3];
    memset(jc, 0, sizeof jc);
    jc[0].type = SX_FIELD_INT64;
    jc[0].i64 = ids;
    jc[1].type = SX_FIELD_VARCHAR;
    jc[1].str = docs;

    static const struct {
        const char *src;
        unsigned want;
    } cs[] = {
        { "array_contains(arr, 2)", 0x81 },
        { "ARRAY_CONTAINS(arr, 1)", 0x41 }, /* 1.0 == 1; "1" is not 1, [1] is not 1 */
        { "json_contains(arr, \"a\")", 0x02 },
        { "json_contains(arr, true)", 0x40 },
        { "json_contains(arr, \"1\")", 0x40 },
        { "not array_contains(arr, 2)", 0x7e }, /* non-arrays are FALSE, so NOT is TRUE */
        { "json_contains(arr[\"tags\"], \"y\")", 0x08 },
        { "json_contains(arr[\"n\"], 1.5)", 0x08 },
        { "json_contains(arr[\"k\"], 7)", 0x00 }, /* 7 is not an array */
        { "array_contains_all(arr, [1, 3])", 0x01 },
        { "array_contains_all(arr, [1, 4])", 0x00 },
        { "array_contains_all(arr, [])", 0xc7 }, /* every array holds all of nothing */
        { "array_contains_any(arr, [4, \"b\", 3])", 0x03 },
        { "array_contains_any(arr, [])", 0x00 },
        { "json_contains_any(arr[\"tags\"], [\"q\", \"x\"])", 0x08 },
        { "JSON_CONTAINS_ALL(arr[\"tags\"], [\"y\", \"x\"])", 0x08 },
        { "array_length(arr) == 3", 0x41 },
        { "array_length(arr) == 0", 0x04 },
        { "array_length(arr) >= 2 and id < 3", 0x03 },
        { "not (array_length(arr) == 3)", 0x86 }, /* non-arrays: UNKNOWN, neither side */
        { "array_length(arr[\"tags\"]) + 1 == 3", 0x08 },
        { "array_length(arr) * 2 > id", 0x03 },
        { "array_contains(arr, 2) or array_length(arr) == 0", 0x85 },
        { "array_contains(arr, -1)", 0x00 },
        { "exists arr[\"tags\"]", 0x08 },
        { "EXISTS arr[0]", 0xc3 },                    /* rows with an element 0 */
        { "not exists arr[\"k\"] and id < 5", 0x17 }, /* never UNKNOWN */
        { "exists arr[\"tags\"][1] or id == 0", 0x09 },
    };

    for (size_t k = 0; k < sizeof cs / sizeof cs[0]; k++) {
        uint64_t want = cs[k].want;
        check_rows(&js, jc, ND, cs[k].src, &want);
    }

    static const struct {
        const char *src;
        sx_status st;
        const char *msg;
    } bad[] = {
        { "array_contains(id, 1)", SX_EINVAL, "needs an ARRAY or JSON field" },
        { "array_contains(v, 1)", SX_EINVAL, "vector field" },
        { "array_contains(arr)", SX_EPARSE, "takes two arguments" },
        { "array_contains(arr, id)", SX_EINVAL, "must be a literal" },
        { "array_contains(arr, [1])", SX_EINVAL, "must be a literal" },
        { "array_contains_all(arr, 1)", SX_EINVAL, "must be an array literal" },
        { "array_length(arr, 1)", SX_EPARSE, "unexpected" },
        { "array_contains(arr, 1", SX_EPARSE, "missing ')'" },
        { "array_length(arr)", SX_EINVAL, "must be boolean" },
        { "Array_Contains(arr, 1)", SX_EPARSE, "not supported" },
        { "frobnicate(arr, 1)", SX_EPARSE, "not supported" },
        { "array_contains(nope, 1)", SX_EINVAL, "no field named" },
        { "exists arr", SX_EINVAL, "needs a JSON path" },
        { "exists id", SX_EINVAL, "needs a JSON path" },
        { "exists", SX_EINVAL, "no field named" },
    };

    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        sx__expr *e = NULL;
        sx_status st = sx__expr_parse(bad[k].src, &js, &e);
        if (st != bad[k].st || !strstr(sx_errmsg(), bad[k].msg))
            FAILF("<%s>: %s \"%s\", want %s \"...%s...\"", bad[k].src, sx_status_str(st),
                  sx_errmsg(), sx_status_str(bad[k].st), bad[k].msg);
        if (st == SX_OK)
            sx__expr_free(e);
    }

    /* Random integer arrays of 0..6 elements from 0..9 over 3,000 rows (three chunks), against a
     * model over the same values as C arrays. */
    enum { NR = 3000 };

    uint64_t s = seed0 ^ 0x5eedf00dull;
    static int vals[NR][6];
    static int lens[NR];
    char **texts = malloc(NR * sizeof *texts);
    ASSERT(texts != NULL);
    for (size_t i = 0; i < NR; i++) {
        lens[i] = (int)(test_rand(&s) % 7);
        char buf[64];
        size_t o = 0;
        buf[o++] = '[';
        for (int k = 0; k < lens[i]; k++) {
            vals[i][k] = (int)(test_rand(&s) % 10);
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%d", k ? "," : "", vals[i][k]);
        }
        buf[o++] = ']';
        buf[o] = '\0';
        texts[i] = strdup(buf);
        ASSERT(texts[i] != NULL);
    }
    int64_t *rid = malloc(NR * sizeof *rid);
    ASSERT(rid != NULL);
    for (size_t i = 0; i < NR; i++)
        rid[i] = (int64_t)i;
    jc[0].i64 = rid;
    jc[1].str = (const char *const *)texts;
    uint64_t want[(NR + 63) / 64];
    for (int round = 0; round < 40; round++) {
        int fn = (int)(test_rand(&s) % 4); /* contains, all, any, length */
        int nl = 1 + (int)(test_rand(&s) % 3);
        int lit[3];
        char src[128];
        size_t o = 0;
        for (int k = 0; k < nl; k++)
            lit[k] = (int)(test_rand(&s) % 11); /* 10 is never present */
        if (fn == 0) {
            nl = 1;
            o = (size_t)snprintf(src, sizeof src, "array_contains(arr, %d)", lit[0]);
        } else if (fn == 3) {
            o = (size_t)snprintf(src, sizeof src, "array_length(arr) == %d", lit[0] % 7);
        } else {
            o = (size_t)snprintf(src, sizeof src, "array_contains_%s(arr, [",
                                 fn == 1 ? "all" : "any");
            for (int k = 0; k < nl; k++)
                o += (size_t)snprintf(src + o, sizeof src - o, "%s%d", k ? ", " : "", lit[k]);
            (void)snprintf(src + o, sizeof src - o, "])");
        }
        memset(want, 0, sizeof want);
        for (size_t i = 0; i < NR; i++) {
            bool m;
            if (fn == 3) {
                m = lens[i] == lit[0] % 7;
            } else {
                int found = 0;
                for (int k = 0; k < nl; k++) {
                    bool f = false;
                    for (int q = 0; q < lens[i]; q++)
                        f = f || vals[i][q] == lit[k];
                    found += f;
                }
                m = fn == 1 ? found == nl : found > 0;
            }
            if (m)
                want[i / 64] |= (uint64_t)1 << (i % 64);
        }
        check_rows(&js, jc, NR, src, want);
    }
    for (size_t i = 0; i < NR; i++)
        free(texts[i]);
    free(texts);
    free(rid);
}

static void test_unknown_field_message(void)
{
    sx__expr *e = NULL;
    ASSERT_STATUS(parse("a > 1 and color == red", &e), SX_EINVAL);
    const char *msg = sx_errmsg();
    const char *want = "no field named \"color\" (the fields a filter can use: id, a, b, big, d, "
                       "price, flag, flag2, name, tag) at position 10";
    if (strcmp(msg, want) != 0)
        FAILF("message \"%s\", want \"%s\"", msg, want);
    /* `tag == red`: the bare word is the unknown field */
    ASSERT_STATUS(parse("tag == red", &e), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "no field named \"red\"") != NULL);

    static char names[40][64];
    const char *np[40];
    sx_field_type ty[40];
    for (size_t i = 0; i < 40; i++) {
        snprintf(names[i], sizeof names[i], "a_rather_long_field_name_number_%02zu", i);
        np[i] = names[i];
        ty[i] = SX_FIELD_INT64;
    }
    sx__expr_schema big = { 40, np, ty };
    ASSERT_STATUS(sx__expr_parse("zz == 1", &big, &e), SX_EINVAL);
    msg = sx_errmsg();
    ASSERT(strstr(msg, "a_rather_long_field_name_number_00, ") != NULL);
    ASSERT(strstr(msg, "...) at position 0") != NULL);
    sx__expr_schema vec_only = { 1, (const char *const[]){ "v" },
                                 (const sx_field_type[]){ SX_FIELD_FLOAT_VECTOR } };
    ASSERT_STATUS(sx__expr_parse("zz == 1", &vec_only, &e), SX_EINVAL);
    ASSERT(strstr(sx_errmsg(), "(the fields a filter can use: none)") != NULL);
}

int main(void)
{
    seed0 = test_seed();
    make_table(seed0);
    RUN(test_fixed_cases);
    RUN(test_block_sizes);
    RUN(test_literals);
    RUN(test_point_lookup);
    RUN(test_errors);
    RUN(test_limits);
    RUN(test_random_expressions);
    RUN(test_robustness);
    RUN(test_oom);
    RUN(test_concurrent_eval);
    RUN(test_misuse);
    RUN(test_json_paths);
    RUN(test_json_functions);
    RUN(test_unknown_field_message);
    return TEST_DONE();
}
