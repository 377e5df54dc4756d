/*
 * expr.c: Milvus boolean filter expressions: a hand-written lexer, a recursive-descent
 * (precedence-climbing) parser that type-checks against the schema and folds constants, and a
 * chunked, column-at-a-time evaluator that produces bitsets. The accepted grammar, precedence
 * table, coercions and error messages are specified in docs/internals/FILTER.md; this note covers
 * the implementation.
 *
 * Phases.
 *   lex()          on demand, one token of lookahead (plus a second peek for `not in`); a token
 *                  is a pure function of its start offset, so peeking is re-lexing.
 *   parse_*()      build a typed AST in a per-expression bump arena. Every node constructor
 *                  (make_*) type-checks its operands, folds constants and normalises: a
 *                  comparison with one constant operand becomes K_CMPC with the constant on the
 *                  right, an INT64 operand compared with a DOUBLE constant is rewritten to an
 *                  integer comparison (or to "always"/"never"), `x == true` becomes x, `and`/`or`
 *                  chains are flattened into n-ary nodes, `not not x` becomes x; `in` sets are
 *                  sorted (a dense INT64 set becomes a bitmap), `like` patterns classified.
 *   sx__expr_eval  walks the tree once per chunk of CHUNK rows. Leaves run tight loops over
 *                  column arrays producing 64-row bitset words; arithmetic materialises one
 *                  value vector per node; and/or/not combine words.
 *
 * Three-valued logic. A row is UNKNOWN for a predicate when an integer division or modulo by
 * zero occurred in one of its operands, or when an operand is a nullable field whose value is
 * NULL in that row (K_FIELD copies the column's NULL bits into its register's u; `f is null` is
 * K_ISNULL, never UNKNOWN). Every predicate result is a pair of bitsets (t = TRUE rows, u = UNKNOWN
 * rows; u is materialised only when a subtree can produce it: node->may_unk). and/or/not follow
 * Kleene's logic, and the final filter keeps the TRUE rows only, so `a / 0 == 1` and `not (a / 0 ==
 * 1)` both match nothing.
 *
 * Invariants.
 *   1. Constants reach the evaluator only as K_ARITH operands (read as scalars) or as the whole
 *      expression: every other operator folds constant operands, and a comparison moves its one
 *      constant operand into the node (K_CMPC). Integer division or modulo by a literal zero is
 *      never folded, so that it yields UNKNOWN at run time.
 *   2. Tree height and parser nesting (parentheses, brackets, prefix operators) are both at most
 *      MAX_DEPTH, so every recursive walk (parse, eval) is bounded.
 *   3. Evaluator registers: a node evaluated into register r uses r for its result and r+1.. for
 *      temporaries; node->regs is the count it needs (Sethi-Ullman numbering), so the scratch is
 *      root->regs registers, each CHUNK values + two CW-word bitsets.
 *   4. Predicate bitsets: bits past the last row of a chunk are zero, and t & u == 0.
 *   5. The middle operand of a range `lo < x < hi` is shared by its two comparisons, so the tree
 *      is a DAG; nodes live in the arena and are freed with it, never one by one.
 *
 * `like`. A general pattern (one that is not exact, `p%`, `%s`, `%i%`, `%` or never) is compiled
 * once per expression (build_segs, at parse time) into its segments: the runs of items between
 * `%`. Matching a value of n bytes: the first segment anchored at the start (unless the pattern
 * starts with `%`), the last anchored at the end (unless it ends with `%`), the middle ones found
 * leftmost in order. Leftmost is enough because a segment's match end never decreases as its
 * start grows (a literal advances one byte; `_` advances to the next character start, both
 * monotone) and `%` lets the rest start anywhere after it. A segment without `_` is found with
 * memmem (glibc: two-way, linear) or compared in place when anchored; a segment with `_` runs a
 * Shift-And over bytes (seg_scan) whose second state vector holds the `_` still taking
 * continuation bytes, so `_` keeps its one-character meaning (u8len_at). Each byte of the value
 * is scanned by one segment only, so the worst case is O(n * ceil(m / 64) + m) for a pattern of
 * m items (O(n + m) without `_`); tables are at most ~32 bytes per pattern byte, and the
 * evaluator's scratch holds the two state vectors. The one-backtrack-point matcher this replaced
 * was O(n * m): 3.8 s for `%a%` + 30,000 `a` + `b` over four 65,535-byte values.
 *
 * Rejected alternatives. A per-row tree walk was rejected (an indirect call per node per row).
 * Evaluating whole blocks at once was rejected for chunks of 1024 rows: temporaries stay in L1/L2
 * and the scratch size does not depend on the block size. A generated-bytecode VM was judged not
 * worth it at this size.
 *
 * Thread-safety: sx__expr_parse and sx__expr_free touch only their arguments; a parsed sx__expr
 * is immutable and sx__expr_eval may run on it from many threads (scratch is per call).
 */
#include "engine/expr.h"

#include <jansson.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/alloc.h"
#include "util/bitset.h"
#include "util/deadline.h"
#include "util/err.h"

#define MAX_DEPTH 256
#define MAX_LEN   65536
#define CHUNK     1024
#define CW        (CHUNK / 64)

/* ------------------------------------------------------------------ arena */

typedef struct ablock {
    struct ablock *next;
    size_t used, cap;
    max_align_t mem[];
} ablock;

static void *aalloc(ablock **head, size_t size)
{
    if (size > ((size_t)1 << 40))
        return NULL;
    size = (size + 15) & ~(size_t)15;
    ablock *b = *head;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 8000 ? size : 8000;
        ablock *nb = sx__malloc(sizeof *nb + cap);
        if (!nb)
            return NULL;
        nb->next = b;
        nb->used = 0;
        nb->cap = cap;
        *head = nb;
        b = nb;
    }
    void *p = (char *)b->mem + b->used;
    b->used += size;
    return p;
}

static void afree(ablock *b)
{
    while (b) {
        ablock *next = b->next;
        sx__free(b);
        b = next;
    }
}

/* ------------------------------------------------------------------ tokens, types, nodes */

enum tkind {
    T_END,
    T_INT,
    T_FLOAT,
    T_STR,
    T_IDENT,
    T_TRUE,
    T_FALSE,
    T_AND,
    T_OR,
    T_NOT,
    T_IN,
    T_LIKE,
    T_IS,
    T_NULL,
    T_LP,
    T_RP,
    T_LB,
    T_RB,
    T_COMMA,
    T_EQ,
    T_NE,
    T_LT,
    T_LE,
    T_GT,
    T_GE,
    T_ADD,
    T_SUB,
    T_MUL,
    T_DIV,
    T_MOD,
    T_POW,
    T_BNOT,
    T_BAND,
    T_BOR,
    T_BXOR,
    T_SHL,
    T_SHR,
    T_REGEX,
    T_NREGEX,
    T_ASSIGN,
    T_LBRACE,
    T_RBRACE,
    T_META
};

typedef struct tok {
    int kind;
    size_t start, end;           /* [start, end) in the source */
    uint64_t u;                  /* T_INT: magnitude */
    double d;                    /* T_FLOAT */
    size_t body, body_end, dlen; /* T_STR: bytes between the quotes, decoded length */
    bool raw;
} tok;

/* binding power, tightest last; 0 = not a binary operator */
enum {
    PREC_OR = 1,
    PREC_AND = 2,
    PREC_BOR = 3,
    PREC_BXOR = 4,
    PREC_BAND = 5,
    PREC_EQ = 6,
    PREC_REL = 7,
    PREC_IN = 8,
    PREC_SHIFT = 9,
    PREC_ADD = 10,
    PREC_MUL = 11,
    PREC_UNARY = 12,
    PREC_POW = 13,
    PREC_LIKE = 14
};

enum vtype { T_NONE, T_BOOLV, T_INTV, T_DBLV, T_STRV, T_ARRV };

enum nkind {
    K_CONST, /* literal (after folding): c */
    K_ARRAY, /* literal array; only the right operand of in */
    K_FIELD, /* column `field` */
    K_NEG,   /* -a */
    K_ARITH, /* a op b */
    K_NOT,
    K_AND, /* kids[0..n_kids) */
    K_OR,
    K_CMP,    /* a op b, neither constant */
    K_CMPC,   /* a op c, c constant; mode says how */
    K_IN,     /* a in set (op = 1: not in) */
    K_LIKE,   /* a like pattern */
    K_JSON,   /* value at a JSON path in the text of VARCHAR column `field` */
    K_JCONT,  /* json_contains / array_contains(_all / _any), exists: a = K_JSON, kids = literals */
    K_ISNULL, /* `field is null` (op = 1: is not null) on a nullable field */
    K_ALEN    /* array_length(a): INT value, a = K_JSON; invalid where a is not an array */
};

/* K_JCONT ops */
enum { JF_CONTAINS, JF_ALL, JF_ANY, JF_LENGTH, JF_EXISTS };

enum { OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_TRUE, OP_FALSE };

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_POW };

enum { CM_INT, CM_DBL, CM_DBL_INT, CM_STR };

enum { LK_NONE, LK_ALL, LK_EXACT, LK_PREFIX, LK_SUFFIX, LK_INFIX, LK_GENERAL };

#define BM_SPAN ((uint64_t)1 << 16)
#define PAT_ONE 256
#define PAT_ANY 257

typedef struct lit {
    int64_t i;
    double d;
    bool b;
    const char *s; /* NUL-terminated arena copy; may hold NULs before len */
    size_t len;
    bool has_nul;
} lit;

typedef struct node node;
typedef struct lseg lseg;

/* One step of a JSON path: an object key, or an array index when key is NULL. */
typedef struct jstep {
    const char *key; /* NUL-terminated arena copy */
    int64_t idx;
} jstep;

struct node {
    uint8_t kind, type;
    uint8_t op;         /* OP_* (K_ARITH, K_CMP, K_CMPC); 1 = `not in` for K_IN */
    uint8_t mode;       /* K_CMPC: CM_*; K_LIKE: LK_* */
    bool may_unk;       /* value may hold invalid rows / predicate may be UNKNOWN */
    bool big;           /* K_CONST: the literal 9223372036854775808 (valid only under '-') */
    uint16_t height;    /* 1 for leaves */
    uint16_t regs;      /* evaluator registers needed */
    size_t pos;         /* offset of the operator or token, for messages */
    size_t start;       /* offset where the node's text starts */
    lit c;              /* K_CONST value; K_CMPC constant; K_LIKE literal part */
    size_t field;       /* K_FIELD, K_JSON */
    const jstep *jpath; /* K_JSON: the path, n_jpath steps */
    size_t n_jpath;
    node *a, *b;
    node **kids; /* K_AND/K_OR children, K_ARRAY elements */
    size_t n_kids, cap_kids;
    /* K_IN set, by operand type */
    const int64_t *set_i;
    const double *set_d;
    const char **set_s; /* NUL-free strings, sorted, unique */
    size_t n_set;
    const uint64_t *set_bm; /* INT64 sets spanning <= BM_SPAN values: bit v - set_i[0] */
    uint64_t bm_span;       /* set_i[n_set - 1] - set_i[0] */
    bool set_t, set_f;
    /* K_LIKE general pattern: the segments between `%`; like_lead / like_trail: the pattern
     * starts / ends with `%` */
    const lseg *segs;
    size_t n_segs;
    bool like_lead, like_trail;
};

struct sx__expr {
    ablock *arena;
    node *root;
    size_t n_used;
    size_t *used; /* field indexes read by the expression */
    sx_field_type *used_types;
    size_t like_words; /* scratch words the general like needs (2 x the largest lseg.nw) */
};

typedef struct parser {
    const char *src;
    size_t len;
    const sx__expr_schema *schema;
    ablock **arena;
    bool *used; /* per schema field */
    tok cur;
    unsigned depth;
    size_t neg_lit_pos; /* offset of the token right after the latest unary '-' */
    size_t like_words;  /* max over general like nodes of 2 x lseg.nw */
} parser;

#define TRY(x)         \
 do {                  \
  sx_status st_ = (x); \
  if (st_ != SX_OK)    \
   return st_;         \
 } while (0)

/* ------------------------------------------------------------------ errors */

/* perr / terr record the message and evaluate to their status. The status is spelled out here
 * rather than returned by the variadic functions: clang-tidy's analyzer does not follow variadic
 * calls, and took every `return perr(...)` for a possible SX_OK. */
#define perr(...) (perr_msg(__VA_ARGS__), SX_EPARSE)
#define terr(...) (terr_msg(__VA_ARGS__), SX_EINVAL)

static void perr_msg(size_t pos, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void terr_msg(size_t pos, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* SX_EPARSE: a syntax error at source offset pos. */
static void perr_msg(size_t pos, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)sx__err(SX_EPARSE, "cannot parse expression: %s at position %zu", what, pos);
}

/* SX_EINVAL: a well-formed expression that does not fit the schema (unknown field, types). */
static void terr_msg(size_t pos, const char *fmt, ...)
{
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    (void)sx__err(SX_EINVAL, "%s at position %zu", what, pos);
}

static sx_status oom(void)
{
    (void)sx__err(SX_ENOMEM, "out of memory parsing a filter expression");
    return SX_ENOMEM;
}

/* Printable rendering of src[a, b) (at most 24 bytes) for messages. */
static void snippet(const char *src, size_t a, size_t b, char *buf, size_t cap)
{
    size_t o = 0;
    bool cut = b - a > 24;
    if (cut)
        b = a + 24;
    for (size_t k = a; k < b && o + 5 < cap; k++) {
        unsigned char c = (unsigned char)src[k];
        if (c >= 0x20 && c < 0x7f) {
            buf[o++] = (char)c;
        } else {
            static const char hex[] = "0123456789abcdef";
            buf[o++] = '\\';
            buf[o++] = 'x';
            buf[o++] = hex[c >> 4];
            buf[o++] = hex[c & 15];
        }
    }
    if (cut && o + 4 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o] = '\0';
}

static sx_status unexpected(const parser *p, const tok *t)
{
    if (t->kind == T_END)
        return perr(t->start, "unexpected end of expression");
    char sn[120];
    snippet(p->src, t->start, t->end, sn, sizeof sn);
    return perr(t->start, "unexpected '%s'", sn);
}

static const char *tname(int type)
{
    switch (type) {
    case T_BOOLV:
        return "BOOL";
    case T_INTV:
        return "INT64";
    case T_DBLV:
        return "DOUBLE";
    case T_STRV:
        return "VARCHAR";
    case T_ARRV:
        return "array";
    default:
        return "?";
    }
}

/* ------------------------------------------------------------------ lexer */

static bool is_digit(int c)
{
    return c >= '0' && c <= '9';
}

static bool is_alpha_(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}

static bool is_alnum_(int c)
{
    return is_alpha_(c) || is_digit(c);
}

static int hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Float literals are converted in the C locale whatever the process locale is. The locale
 * object is created once and kept for the life of the process. */
static locale_t c_loc;
static pthread_once_t c_loc_once = PTHREAD_ONCE_INIT;

static void c_loc_init(void)
{
    c_loc = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static double parse_double(const char *s, char **end)
{
    (void)pthread_once(&c_loc_once, c_loc_init);
    if (c_loc)
        return strtod_l(s, end, c_loc);
    return strtod(s, end); /* XXX: wrong if LC_NUMERIC uses ',' and newlocale failed */
}

static sx_status lex_number(const parser *p, size_t i, tok *t)
{
    const char *s = p->src;
    size_t n = p->len, j = i;
    if (s[i] == '0' && i + 1 < n &&
        (s[i + 1] == 'x' || s[i + 1] == 'X' || s[i + 1] == 'b' || s[i + 1] == 'B')) {
        unsigned base = (s[i + 1] == 'x' || s[i + 1] == 'X') ? 16 : 2;
        uint64_t v = 0;
        size_t nd = 0;
        for (j = i + 2; j < n; j++) {
            int dv = hexval((unsigned char)s[j]);
            if (dv < 0 || (unsigned)dv >= base)
                break;
            if (v > (UINT64_MAX - (unsigned)dv) / base)
                return perr(i, "integer literal out of range");
            v = v * base + (unsigned)dv;
            nd++;
        }
        if (nd == 0 || (j < n && (is_alnum_((unsigned char)s[j]) || s[j] == '.')))
            return perr(i, "invalid %s literal", base == 16 ? "hexadecimal" : "binary");
        t->kind = T_INT;
        t->u = v;
        t->end = j;
        return SX_OK;
    }
    bool is_float = false;
    while (j < n && is_digit((unsigned char)s[j]))
        j++;
    if (j < n && s[j] == '.') {
        is_float = true;
        j++;
        while (j < n && is_digit((unsigned char)s[j]))
            j++;
    }
    if (j < n && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < n && (s[k] == '+' || s[k] == '-'))
            k++;
        if (k >= n || !is_digit((unsigned char)s[k]))
            return perr(i, "invalid number literal");
        while (k < n && is_digit((unsigned char)s[k]))
            k++;
        j = k;
        is_float = true;
    }
    if (j < n && (is_alnum_((unsigned char)s[j]) || s[j] == '.'))
        return perr(i, "invalid number literal");
    t->end = j;
    if (is_float) {
        char *end = NULL;
        double d = parse_double(s + i, &end);
        if (end != s + j)
            return perr(i, "invalid number literal");
        if (isinf(d))
            return perr(i, "floating-point literal out of range");
        t->kind = T_FLOAT;
        t->d = d;
        return SX_OK;
    }
    unsigned base = (s[i] == '0' && j - i > 1) ? 8 : 10;
    uint64_t v = 0;
    for (size_t k = i; k < j; k++) {
        unsigned dv = (unsigned)(s[k] - '0');
        if (dv >= base)
            return perr(i, "invalid octal literal");
        if (v > (UINT64_MAX - dv) / base)
            return perr(i, "integer literal out of range");
        v = v * base + dv;
    }
    t->kind = T_INT;
    t->u = v;
    return SX_OK;
}

/* Decodes the string token t into out (NULL: only validate and measure). Escapes: C's simple
 * escapes, \ooo (<= 0377), \xh.. (<= 0xff), \uXXXX, \UXXXXXXXX (UTF-8 encoded), backslash-newline
 * (removed); an unknown escape \c keeps both bytes. Raw strings keep every byte verbatim. */
static sx_status decode_string(const parser *p, const tok *t, char *out, size_t *len)
{
    const char *s = p->src;
    size_t j = t->body, e = t->body_end, o = 0;
#define EMIT(ch)        \
 do {                   \
  if (out)              \
   out[o] = (char)(ch); \
  o++;                  \
 } while (0)
    while (j < e) {
        unsigned char c = (unsigned char)s[j];
        if (c != '\\' || t->raw) {
            EMIT(c);
            j++;
            continue;
        }
        unsigned char x = (unsigned char)s[j + 1]; /* the lexer guarantees a byte follows */
        switch (x) {
        case '\n':
            j += 2;
            continue;
        case '\r':
            j += (j + 2 < e && s[j + 2] == '\n') ? 3 : 2;
            continue;
        case 'a':
            EMIT(7);
            break;
        case 'b':
            EMIT(8);
            break;
        case 'f':
            EMIT(12);
            break;
        case 'n':
            EMIT(10);
            break;
        case 'r':
            EMIT(13);
            break;
        case 't':
            EMIT(9);
            break;
        case 'v':
            EMIT(11);
            break;
        case '\'':
        case '"':
        case '?':
        case '\\':
            EMIT(x);
            break;
        case 'x': {
            size_t k = j + 2, nd = 0;
            unsigned v = 0;
            while (k < e && hexval((unsigned char)s[k]) >= 0) {
                if (v <= 0xff)
                    v = v * 16 + (unsigned)hexval((unsigned char)s[k]);
                k++;
                nd++;
            }
            if (nd == 0)
                return perr(j, "invalid \\x escape in string literal");
            if (v > 0xff)
                return perr(j, "\\x escape out of range in string literal");
            EMIT(v);
            j = k;
            continue;
        }
        case 'u':
        case 'U': {
            size_t need = x == 'u' ? 4 : 8;
            uint32_t cp = 0;
            for (size_t k = 0; k < need; k++) {
                int hv = j + 2 + k < e ? hexval((unsigned char)s[j + 2 + k]) : -1;
                if (hv < 0)
                    return perr(j, "invalid \\%c escape in string literal", x);
                cp = cp * 16 + (uint32_t)hv;
            }
            if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
                return perr(j, "invalid Unicode code point in \\%c escape", x);
            if (cp < 0x80) {
                EMIT(cp);
            } else if (cp < 0x800) {
                EMIT(0xc0 | (cp >> 6));
                EMIT(0x80 | (cp & 0x3f));
            } else if (cp < 0x10000) {
                EMIT(0xe0 | (cp >> 12));
                EMIT(0x80 | ((cp >> 6) & 0x3f));
                EMIT(0x80 | (cp & 0x3f));
            } else {
                EMIT(0xf0 | (cp >> 18));
                EMIT(0x80 | ((cp >> 12) & 0x3f));
                EMIT(0x80 | ((cp >> 6) & 0x3f));
                EMIT(0x80 | (cp & 0x3f));
            }
            j += 2 + need;
            continue;
        }
        default:
            if (x >= '0' && x <= '7') {
                unsigned v = 0;
                size_t k = j + 1;
                for (int cnt = 0; cnt < 3 && k < e && s[k] >= '0' && s[k] <= '7'; cnt++, k++)
                    v = v * 8 + (unsigned)(s[k] - '0');
                if (v > 0xff)
                    return perr(j, "octal escape out of range in string literal");
                EMIT(v);
                j = k;
                continue;
            }
            EMIT('\\');
            EMIT(x);
            break;
        }
        j += 2;
    }
#undef EMIT
    if (out)
        out[o] = '\0';
    *len = o;
    return SX_OK;
}

/* quote is at q; start is where the token starts (an r/u8/u/U/L prefix may precede q) */
static sx_status lex_string(const parser *p, size_t start, size_t q, bool raw, tok *t)
{
    const char *s = p->src;
    size_t n = p->len, j = q + 1;
    char quote = s[q];
    for (;;) {
        if (j >= n || s[j] == '\n' || s[j] == '\r')
            return perr(start, "unterminated string literal");
        if (s[j] == quote)
            break;
        if (s[j] == '\\') {
            if (j + 1 >= n || (raw && (s[j + 1] == '\n' || s[j + 1] == '\r')))
                return perr(start, "unterminated string literal");
            j += (!raw && s[j + 1] == '\r' && j + 2 < n && s[j + 2] == '\n') ? 3 : 2;
            continue;
        }
        j++;
    }
    t->kind = T_STR;
    t->raw = raw;
    t->body = q + 1;
    t->body_end = j;
    t->end = j + 1;
    return decode_string(p, t, NULL, &t->dlen);
}

static int keyword(const char *w, size_t n)
{
    static const struct {
        const char *w;
        int kind;
    } kw[] = {
        { "and", T_AND },   { "AND", T_AND },     { "or", T_OR },       { "OR", T_OR },
        { "not", T_NOT },   { "NOT", T_NOT },     { "in", T_IN },       { "IN", T_IN },
        { "like", T_LIKE }, { "LIKE", T_LIKE },   { "is", T_IS },       { "IS", T_IS },
        { "null", T_NULL }, { "NULL", T_NULL },   { "true", T_TRUE },   { "True", T_TRUE },
        { "TRUE", T_TRUE }, { "false", T_FALSE }, { "False", T_FALSE }, { "FALSE", T_FALSE },
    };

    if (n > 5)
        return T_IDENT;
    for (size_t k = 0; k < sizeof kw / sizeof kw[0]; k++)
        if (strlen(kw[k].w) == n && memcmp(kw[k].w, w, n) == 0)
            return kw[k].kind;
    return T_IDENT;
}

/* Lexes the token starting at or after offset i (after blanks) into *t. */
static sx_status lex(const parser *p, size_t i, tok *t)
{
    const char *s = p->src;
    size_t n = p->len;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\r' || s[i] == '\n'))
        i++;
    memset(t, 0, sizeof *t);
    t->start = i;
    t->end = i + 1;
    if (i >= n) {
        t->kind = T_END;
        t->end = i;
        return SX_OK;
    }
    unsigned char c = (unsigned char)s[i];
    unsigned char c1 = i + 1 < n ? (unsigned char)s[i + 1] : 0;
    if (is_digit(c) || (c == '.' && is_digit(c1)))
        return lex_number(p, i, t);
    if (c == '"' || c == '\'')
        return lex_string(p, i, i, false, t);
    if (is_alpha_(c)) {
        size_t j = i;
        while (j < n && is_alnum_((unsigned char)s[j]))
            j++;
        size_t wl = j - i;
        if (j < n && (s[j] == '"' || s[j] == '\'')) {
            if (wl == 1 && (c == 'r' || c == 'R'))
                return lex_string(p, i, j, true, t);
            if ((wl == 1 && (c == 'u' || c == 'U' || c == 'L')) ||
                (wl == 2 && c == 'u' && s[i + 1] == '8'))
                return lex_string(p, i, j, false, t);
        }
        t->end = j;
        t->kind = keyword(s + i, wl);
        return SX_OK;
    }
    int k2 = -1, k1 = -1;
    switch (c) {
    case '(':
        k1 = T_LP;
        break;
    case ')':
        k1 = T_RP;
        break;
    case '[':
        k1 = T_LB;
        break;
    case ']':
        k1 = T_RB;
        break;
    case '{':
        k1 = T_LBRACE;
        break;
    case '}':
        k1 = T_RBRACE;
        break;
    case ',':
        k1 = T_COMMA;
        break;
    case '+':
        k1 = T_ADD;
        break;
    case '-':
        k1 = T_SUB;
        break;
    case '/':
        k1 = T_DIV;
        break;
    case '%':
        k1 = T_MOD;
        break;
    case '^':
        k1 = T_BXOR;
        break;
    case '~':
        k1 = T_BNOT;
        break;
    case '*':
        k1 = T_MUL;
        k2 = c1 == '*' ? T_POW : -1;
        break;
    case '=':
        k1 = T_ASSIGN;
        k2 = c1 == '=' ? T_EQ : c1 == '~' ? T_REGEX : -1;
        break;
    case '!':
        k1 = T_NOT;
        k2 = c1 == '=' ? T_NE : c1 == '~' ? T_NREGEX : -1;
        break;
    case '<':
        k1 = T_LT;
        k2 = c1 == '=' ? T_LE : c1 == '<' ? T_SHL : -1;
        break;
    case '>':
        k1 = T_GT;
        k2 = c1 == '=' ? T_GE : c1 == '>' ? T_SHR : -1;
        break;
    case '&':
        k1 = T_BAND;
        k2 = c1 == '&' ? T_AND : -1;
        break;
    case '|':
        k1 = T_BOR;
        k2 = c1 == '|' ? T_OR : -1;
        break;
    case '$':
        if (n - i >= 5 && memcmp(s + i, "$meta", 5) == 0 &&
            !(i + 5 < n && is_alnum_((unsigned char)s[i + 5]))) {
            t->kind = T_META;
            t->end = i + 5;
            return SX_OK;
        }
        break;
    default:
        break;
    }
    if (k2 >= 0) {
        t->kind = k2;
        t->end = i + 2;
        return SX_OK;
    }
    if (k1 >= 0) {
        t->kind = k1;
        return SX_OK;
    }
    char sn[16];
    snippet(s, i, i + 1, sn, sizeof sn);
    return perr(i, "unexpected character '%s'", sn);
}

static sx_status advance(parser *p)
{
    return lex(p, p->cur.end, &p->cur);
}

/* ------------------------------------------------------------------ shared semantics
 * Used by constant folding and by the evaluator alike, so both agree bit for bit. */

static inline int64_t wadd(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a + (uint64_t)b);
}

static inline int64_t wsub(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a - (uint64_t)b);
}

static inline int64_t wmul(int64_t a, int64_t b)
{
    return (int64_t)((uint64_t)a * (uint64_t)b);
}

static inline int64_t wneg(int64_t a)
{
    return (int64_t)(0 - (uint64_t)a);
}

/* b == 0 is the caller's business (the row is invalid); the value returned is 0 */
static inline int64_t idiv(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    if (b == -1)
        return wneg(a);
    return a / b;
}

static inline int64_t imod(int64_t a, int64_t b)
{
    if (b == 0 || b == -1)
        return 0;
    return a % b;
}

static int64_t iarith(int op, int64_t a, int64_t b)
{
    switch (op) {
    case OP_ADD:
        return wadd(a, b);
    case OP_SUB:
        return wsub(a, b);
    case OP_MUL:
        return wmul(a, b);
    case OP_DIV:
        return idiv(a, b);
    default:
        return imod(a, b);
    }
}

static double darith(int op, double a, double b)
{
    switch (op) {
    case OP_ADD:
        return a + b;
    case OP_SUB:
        return a - b;
    case OP_MUL:
        return a * b;
    case OP_DIV:
        return a / b;
    case OP_MOD:
        return fmod(a, b);
    default:
        return pow(a, b);
    }
}

/* Exact comparison of an int64 with a double: -1, 0, 1, or 2 when d is NaN (unordered). */
static inline int cmp_i64_f64(int64_t a, double d)
{
    if (d != d)
        return 2;
    if (d >= 9223372036854775808.0)
        return -1;
    if (d < -9223372036854775808.0)
        return 1;
    double tr = trunc(d);
    int64_t t = (int64_t)tr;
    if (a != t)
        return a < t ? -1 : 1;
    double fr = d - tr;
    return fr > 0 ? -1 : fr < 0 ? 1 : 0;
}

static inline int cmp_f64_i64(double d, int64_t a)
{
    int c = cmp_i64_f64(a, d);
    return c == 2 ? 2 : -c;
}

static inline bool op_holds(int op, int c3)
{
    switch (op) {
    case OP_EQ:
        return c3 == 0;
    case OP_NE:
        return c3 != 0;
    case OP_LT:
        return c3 == -1;
    case OP_LE:
        return c3 == -1 || c3 == 0;
    case OP_GT:
        return c3 == 1;
    default:
        return c3 == 1 || c3 == 0;
    }
}

static inline int sgn(int v)
{
    return (v > 0) - (v < 0);
}

/* Byte-wise comparison of the C string s with the literal p[0, len) (which may hold NULs). */
static inline int cmp_str_lit(const char *s, const char *p, size_t len, bool has_nul)
{
    if (!has_nul) {
        int c = strncmp(s, p, len);
        if (c != 0)
            return sgn(c);
        return s[len] ? 1 : 0;
    }
    for (size_t k = 0; k < len; k++) {
        unsigned char x = (unsigned char)s[k], y = (unsigned char)p[k];
        if (x == 0)
            return -1;
        if (x != y)
            return x < y ? -1 : 1;
    }
    return s[len] ? 1 : 0;
}

static int cmp_lit_lit(const lit *a, const lit *b)
{
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    if (c != 0)
        return sgn(c);
    return a->len < b->len ? -1 : a->len > b->len ? 1 : 0;
}

static inline double as_dbl(int type, const lit *v)
{
    return type == T_INTV ? (double)v->i : v->d;
}

/* The double equal to c if there is one. */
static bool i64_exact_dbl(int64_t c, double *out)
{
    double d = (double)c;
    if (d >= 9223372036854775808.0 || (int64_t)d != c)
        return false;
    *out = d;
    return true;
}

/* The int64 equal to d if there is one. */
static bool dbl_exact_i64(double d, int64_t *out)
{
    if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0) || trunc(d) != d)
        return false;
    *out = (int64_t)d;
    return true;
}

#define S(p) ((p) ? (p) : "")

/* one character = a byte that is not a UTF-8 continuation byte, plus its continuation bytes */
static inline size_t u8len_at(const unsigned char *s)
{
    size_t k = 1;
    while ((s[k] & 0xc0) == 0x80)
        k++;
    return k;
}

/* A `like` pattern in segments. The items between two `%` form one segment (a run of literal
 * bytes and `_`); `%` runs are collapsed at compile time, so every segment is non-empty. */
struct lseg {
    const unsigned char *lit; /* !has_one: the literal bytes */
    size_t len;               /* items: bytes or `_` */
    const int16_t *items;     /* has_one: the items (bytes, PAT_ONE) */
    /* has_one: Shift-And tables, nw words per vector; bit j is item j */
    size_t nw;
    const uint8_t *cls;    /* 256 entries: byte -> row of masks (0: a byte no item matches) */
    const uint64_t *masks; /* rows x nw: bit j set when item j is that literal byte */
    const uint64_t *one;   /* nw: bit j set when item j is `_` */
    bool has_one;
};

static inline bool is_cont(unsigned char c)
{
    return (c & 0xc0) == 0x80;
}

/* Segment g anchored at s + at (n bytes in all): where its one match starting there ends, or
 * SIZE_MAX. `_` takes a byte and every continuation byte after it (u8len_at). O(g->len). */
static size_t seg_at(const lseg *g, const unsigned char *s, size_t at, size_t n)
{
    if (!g->has_one)
        return n - at >= g->len && memcmp(s + at, g->lit, g->len) == 0 ? at + g->len : SIZE_MAX;
    size_t y = at;
    for (size_t j = 0; j < g->len; j++) {
        if (y >= n)
            return SIZE_MAX;
        if (g->items[j] == PAT_ONE)
            y += u8len_at(s + y);
        else if ((unsigned char)g->items[j] == s[y])
            y++;
        else
            return SIZE_MAX;
    }
    return y;
}

/* Shift-And over bytes for a segment with `_`, every start in [from, n) allowed: the smallest
 * end of a match (to_end false), or n when a match ends at n (to_end true); SIZE_MAX if none.
 * D bit j: items 0..j match ending here. P bit j: item j is a `_` still taking continuation
 * bytes; it completes (moves to D) before the first byte that is not one, which is what makes
 * `_` take all of them as u8len_at does. O((n - from) * nw); d and pv hold nw words each. */
static size_t seg_scan(const lseg *g,
                       const unsigned char *s,
                       size_t from,
                       size_t n,
                       bool to_end,
                       uint64_t *d,
                       uint64_t *pv)
{
    size_t nw = g->nw, lw = (g->len - 1) / 64;
    uint64_t lastbit = (uint64_t)1 << ((g->len - 1) % 64);
    memset(d, 0, nw * sizeof *d);
    memset(pv, 0, nw * sizeof *pv);
    bool any_p = false;
    for (size_t y = from;; y++) {
        unsigned char c = y < n ? s[y] : 0;
        if (any_p && !is_cont(c)) {
            for (size_t w = 0; w < nw; w++) {
                d[w] |= pv[w];
                pv[w] = 0;
            }
            any_p = false;
        }
        if ((d[lw] & lastbit) && (!to_end || y == n))
            return y;
        if (y >= n)
            return SIZE_MAX;
        const uint64_t *b = g->masks + (size_t)g->cls[c] * nw;
        uint64_t carry = 1, newp = 0;
        for (size_t w = 0; w < nw; w++) {
            uint64_t v = d[w], sh = (v << 1) | carry;
            carry = v >> 63;
            d[w] = sh & b[w];
            uint64_t np = sh & g->one[w];
            pv[w] |= np;
            newp |= np;
        }
        any_p = any_p || newp != 0;
    }
}

/* Whether segment g matches somewhere in [from, n): its smallest end, or SIZE_MAX. Leftmost
 * (smallest-end) matching is enough: a segment's end does not decrease as its start grows, and
 * `%` lets the rest start anywhere after it. */
static size_t seg_find(const lseg *g, const unsigned char *s, size_t from, size_t n, uint64_t *sc)
{
    if (g->has_one)
        return seg_scan(g, s, from, n, false, sc, sc + g->nw);
    /* glibc memmem is the two-way algorithm for long needles: linear in n - from + g->len */
    const unsigned char *hit = memmem(s + from, n - from, g->lit, g->len);
    return hit ? (size_t)(hit - s) + g->len : SIZE_MAX;
}

/* The general like: the first segment anchored at the start unless the pattern starts with `%`,
 * the last anchored at the end unless it ends with `%`, the others found leftmost in order.
 * sc: scratch of 2 * (the largest nw) words. */
static bool like_general(const node *e, const char *str, uint64_t *sc)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t n = strlen(str), ns = e->n_segs, cur = 0, k = 0;
    if (ns == 0)
        return e->like_lead || n == 0;
    if (!e->like_lead) {
        cur = seg_at(&e->segs[0], s, 0, n);
        if (cur == SIZE_MAX)
            return false;
        k = 1;
        if (ns == 1)
            return e->like_trail || cur == n;
    }
    size_t mid_end = e->like_trail ? ns : ns - 1;
    for (; k < mid_end; k++) {
        cur = seg_find(&e->segs[k], s, cur, n, sc);
        if (cur == SIZE_MAX)
            return false;
    }
    if (e->like_trail)
        return true;
    const lseg *g = &e->segs[ns - 1];
    if (!g->has_one)
        return n - cur >= g->len && memcmp(s + n - g->len, g->lit, g->len) == 0;
    return seg_scan(g, s, cur, n, true, sc, sc + g->nw) == n;
}

static bool like_match(const node *e, const char *s, uint64_t *sc)
{
    switch (e->mode) {
    case LK_NONE:
        return false;
    case LK_ALL:
        return true;
    case LK_EXACT:
        return strcmp(s, e->c.s) == 0;
    case LK_PREFIX:
        return strncmp(s, e->c.s, e->c.len) == 0;
    case LK_SUFFIX: {
        size_t sl = strlen(s);
        return sl >= e->c.len && memcmp(s + sl - e->c.len, e->c.s, e->c.len) == 0;
    }
    case LK_INFIX:
        return strstr(s, e->c.s) != NULL;
    default:
        return like_general(e, s, sc);
    }
}

static int cmp_i64(const void *x, const void *y)
{
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static int cmp_dbl(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int cmp_cstr(const void *x, const void *y)
{
    return strcmp(*(const char *const *)x, *(const char *const *)y);
}

static inline bool in_i64(const int64_t *set, size_t n, int64_t v)
{
    if (n <= 8) {
        bool f = false;
        for (size_t k = 0; k < n; k++)
            f |= set[k] == v;
        return f;
    }
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && set[lo] == v;
}

static inline bool in_dbl(const double *set, size_t n, double v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (set[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && set[lo] == v;
}

static inline bool in_str(const char *const *set, size_t n, const char *v)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(set[mid], v) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n && strcmp(set[lo], v) == 0;
}

/* ------------------------------------------------------------------ node constructors */

static sx_status new_node(parser *p, int kind, int type, size_t pos, size_t start, node **out)
{
    node *e = aalloc(p->arena, sizeof *e);
    if (!e)
        return oom();
    memset(e, 0, sizeof *e);
    e->kind = (uint8_t)kind;
    e->type = (uint8_t)type;
    e->pos = pos;
    e->start = start;
    e->height = 1;
    e->regs = 1;
    *out = e;
    return SX_OK;
}

/* Sets height/regs/may_unk of e from its operands a (and b); b is evaluated one register up. */
static sx_status finish2(node *e, const node *a, const node *b)
{
    unsigned h = a->height, r = a->regs;
    e->may_unk = e->may_unk || a->may_unk;
    if (b) {
        if (b->height > h)
            h = b->height;
        if (b->regs + 1u > r)
            r = b->regs + 1u;
        e->may_unk = e->may_unk || b->may_unk;
    }
    if (h + 1 > MAX_DEPTH)
        return perr(e->pos, "expression nested too deeply (max depth %d)", MAX_DEPTH);
    e->height = (uint16_t)(h + 1);
    e->regs = (uint16_t)r;
    return SX_OK;
}

static sx_status mk_const(parser *p, int type, size_t pos, size_t start, node **out)
{
    TRY(new_node(p, K_CONST, type, pos, start, out));
    return SX_OK;
}

static sx_status mk_bool(parser *p, bool v, size_t pos, size_t start, node **out)
{
    TRY(mk_const(p, T_BOOLV, pos, start, out));
    (*out)->c.b = v;
    return SX_OK;
}

static bool is_const(const node *e)
{
    return e->kind == K_CONST;
}

static bool is_num(int type)
{
    return type == T_INTV || type == T_DBLV;
}

static sx_status need_scalar(const node *e)
{
    if (e->type == T_ARRV)
        return terr(e->start, "array literal is only allowed after 'in' / 'not in'");
    if (e->big)
        return perr(e->start, "integer literal out of range");
    return SX_OK;
}

/* JSON paths. A K_JSON node has no type until its use gives it one (jbind): compared with a
 * string it reads strings, with a number or in arithmetic numbers (as DOUBLE), in and/or/not or
 * as the whole expression booleans. A row whose text is not JSON, lacks the path, or holds a
 * value of another type there is UNKNOWN for the predicate (neither it nor its negation matches),
 * the way Milvus treats a missing dynamic-field key. */
static bool junbound(const node *x)
{
    return x->kind == K_JSON && x->type == T_NONE;
}

static void jbind(node *x, int type)
{
    if (junbound(x))
        x->type = (uint8_t)(type == T_INTV ? T_DBLV : type);
}

static sx_status make_neg(parser *p, const tok *op, node *x, node **out)
{
    jbind(x, T_DBLV);
    if (x->type == T_ARRV)
        TRY(need_scalar(x));
    if (!is_num(x->type))
        return terr(op->start, "unary '-' requires a numeric operand, got %s", tname(x->type));
    if (is_const(x)) {
        TRY(mk_const(p, x->type, op->start, op->start, out));
        (*out)->c.i = x->big ? INT64_MIN : wneg(x->c.i);
        (*out)->c.d = -x->c.d;
        return SX_OK;
    }
    TRY(new_node(p, K_NEG, x->type, op->start, op->start, out));
    (*out)->a = x;
    return finish2(*out, x, NULL);
}

static sx_status make_not(parser *p, size_t pos, node *x, node **out)
{
    jbind(x, T_BOOLV);
    TRY(need_scalar(x));
    if (x->type != T_BOOLV)
        return terr(pos, "'not' requires a boolean operand, got %s", tname(x->type));
    if (is_const(x))
        return mk_bool(p, !x->c.b, pos, pos, out);
    if (x->kind == K_NOT) {
        *out = x->a;
        return SX_OK;
    }
    TRY(new_node(p, K_NOT, T_BOOLV, pos, pos, out));
    (*out)->a = x;
    return finish2(*out, x, NULL);
}

static sx_status make_arith(parser *p, const tok *op, int aop, node *l, node *r, node **out)
{
    jbind(l, T_DBLV);
    jbind(r, T_DBLV);
    TRY(need_scalar(l));
    TRY(need_scalar(r));
    if (!is_num(l->type) || !is_num(r->type)) {
        char sn[16];
        snippet(p->src, op->start, op->end, sn, sizeof sn);
        return terr(op->start, "operator '%s' requires numeric operands, got %s and %s", sn,
                    tname(l->type), tname(r->type));
    }
    int type = (aop == OP_POW || l->type == T_DBLV || r->type == T_DBLV) ? T_DBLV : T_INTV;
    bool int_div = type == T_INTV && (aop == OP_DIV || aop == OP_MOD);
    if (is_const(l) && is_const(r) && !(int_div && r->c.i == 0)) {
        TRY(mk_const(p, type, op->start, l->start, out));
        if (type == T_INTV)
            (*out)->c.i = iarith(aop, l->c.i, r->c.i);
        else
            (*out)->c.d = darith(aop, as_dbl(l->type, &l->c), as_dbl(r->type, &r->c));
        return SX_OK;
    }
    TRY(new_node(p, K_ARITH, type, op->start, l->start, out));
    node *e = *out;
    e->op = (uint8_t)aop;
    e->a = l;
    e->b = r;
    e->may_unk = int_div && !(is_const(r) && r->c.i != 0);
    return finish2(e, l, r);
}

static int flip_op(int op)
{
    switch (op) {
    case OP_LT:
        return OP_GT;
    case OP_LE:
        return OP_GE;
    case OP_GT:
        return OP_LT;
    case OP_GE:
        return OP_LE;
    default:
        return op;
    }
}

static const char *op_text(int op)
{
    static const char *const t[] = { "==", "!=", "<", "<=", ">", ">=" };
    return op >= OP_EQ && op <= OP_GE ? t[op] : "?";
}

/* Constant comparison of two scalar literals of compatible types. */
static bool fold_cmp(int op, const node *l, const node *r)
{
    int c3;
    if (l->type == T_BOOLV)
        c3 = l->c.b == r->c.b ? 0 : 1;
    else if (l->type == T_STRV)
        c3 = cmp_lit_lit(&l->c, &r->c);
    else if (l->type == T_INTV && r->type == T_INTV)
        c3 = (l->c.i > r->c.i) - (l->c.i < r->c.i);
    else if (l->type == T_INTV)
        c3 = cmp_i64_f64(l->c.i, r->c.d);
    else if (r->type == T_INTV)
        c3 = cmp_f64_i64(l->c.d, r->c.i);
    else
        c3 = l->c.d != l->c.d || r->c.d != r->c.d ? 2 : (l->c.d > r->c.d) - (l->c.d < r->c.d);
    return op_holds(op, c3);
}

/* x (INT64 valued) op c (double constant) as an integer comparison: sets *op and *k, or *op to
 * OP_TRUE / OP_FALSE. */
static void int_vs_dbl(int *op, double c, int64_t *k)
{
    if (c != c) {
        *op = *op == OP_NE ? OP_TRUE : OP_FALSE;
        return;
    }
    if (c >= 9223372036854775808.0 || c < -9223372036854775808.0) {
        bool above = c > 0; /* c is beyond every int64 */
        switch (*op) {
        case OP_EQ:
            *op = OP_FALSE;
            break;
        case OP_NE:
            *op = OP_TRUE;
            break;
        case OP_LT:
        case OP_LE:
            *op = above ? OP_TRUE : OP_FALSE;
            break;
        default:
            *op = above ? OP_FALSE : OP_TRUE;
            break;
        }
        return;
    }
    double fl = floor(c), ce = ceil(c);
    bool integral = fl == c;
    switch (*op) {
    case OP_EQ:
        if (!integral)
            *op = OP_FALSE;
        *k = (int64_t)c;
        break;
    case OP_NE:
        if (!integral)
            *op = OP_TRUE;
        *k = (int64_t)c;
        break;
    case OP_LT:
    case OP_GE:
        *k = (int64_t)ce;
        break;
    default: /* LE, GT */
        *k = (int64_t)fl;
        break;
    }
}

static sx_status make_cmpc(parser *p, int op, size_t pos, node *x, const node *c, node **out)
{
    int mode;
    lit cv = c->c;
    if (x->type == T_STRV) {
        mode = CM_STR;
    } else if (x->type == T_INTV && c->type == T_INTV) {
        mode = CM_INT;
    } else if (x->type == T_INTV) {
        mode = CM_INT;
        int_vs_dbl(&op, c->c.d, &cv.i);
        if ((op == OP_TRUE || op == OP_FALSE) && !x->may_unk)
            return mk_bool(p, op == OP_TRUE, pos, x->start, out);
    } else if (c->type == T_DBLV || i64_exact_dbl(c->c.i, &cv.d)) {
        mode = CM_DBL;
    } else {
        mode = CM_DBL_INT;
    }
    TRY(new_node(p, K_CMPC, T_BOOLV, pos, x->start, out));
    node *e = *out;
    e->op = (uint8_t)op;
    e->mode = (uint8_t)mode;
    e->c = cv;
    e->a = x;
    return finish2(e, x, NULL);
}

static sx_status make_cmp(parser *p, const tok *optok, node *l, node *r, node **out)
{
    int op = optok->kind == T_EQ   ? OP_EQ
             : optok->kind == T_NE ? OP_NE
             : optok->kind == T_LT ? OP_LT
             : optok->kind == T_LE ? OP_LE
             : optok->kind == T_GT ? OP_GT
                                   : OP_GE;
    size_t pos = optok->start;
    if (junbound(l) && junbound(r))
        return terr(pos, "cannot compare two JSON paths with each other");
    jbind(l, r->type);
    jbind(r, l->type);
    TRY(need_scalar(l));
    TRY(need_scalar(r));
    bool ok = (is_num(l->type) && is_num(r->type)) || l->type == r->type;
    if (!ok)
        return terr(pos, "cannot compare %s with %s", tname(l->type), tname(r->type));
    if (l->type == T_BOOLV && op != OP_EQ && op != OP_NE)
        return terr(pos, "operator '%s' is not defined on BOOL", op_text(op));
    if (is_const(l) && is_const(r))
        return mk_bool(p, fold_cmp(op, l, r), pos, l->start, out);
    if (l->type == T_BOOLV && (is_const(l) || is_const(r))) {
        node *x = is_const(l) ? r : l;
        bool v = is_const(l) ? l->c.b : r->c.b;
        if ((op == OP_EQ) == v) {
            *out = x;
            return SX_OK;
        }
        return make_not(p, pos, x, out);
    }
    if (is_const(l))
        return make_cmpc(p, flip_op(op), pos, r, l, out);
    if (is_const(r))
        return make_cmpc(p, op, pos, l, r, out);
    TRY(new_node(p, K_CMP, T_BOOLV, pos, l->start, out));
    (*out)->op = (uint8_t)op;
    (*out)->a = l;
    (*out)->b = r;
    return finish2(*out, l, r);
}

static sx_status add_kid(parser *p, node *e, node *k)
{
    if (e->n_kids == e->cap_kids) {
        size_t cap = e->cap_kids ? e->cap_kids * 2 : 4;
        node **kids = aalloc(p->arena, cap * sizeof(node *));
        if (!kids)
            return oom();
        if (e->n_kids)
            memcpy(kids, e->kids, e->n_kids * sizeof(node *));
        e->kids = kids;
        e->cap_kids = cap;
    }
    e->kids[e->n_kids++] = k;
    unsigned h = k->height + 1u, r = k->regs + (e->n_kids > 1 ? 1u : 0u);
    if (h > MAX_DEPTH)
        return perr(e->pos, "expression nested too deeply (max depth %d)", MAX_DEPTH);
    if (h > e->height)
        e->height = (uint16_t)h;
    if (r > e->regs)
        e->regs = (uint16_t)r;
    e->may_unk = e->may_unk || k->may_unk;
    return SX_OK;
}

static sx_status make_logic(parser *p, int kind, const tok *optok, node *l, node *r, node **out)
{
    const char *name = kind == K_AND ? "and" : "or";
    jbind(l, T_BOOLV);
    jbind(r, T_BOOLV);
    TRY(need_scalar(l));
    TRY(need_scalar(r));
    if (l->type != T_BOOLV)
        return terr(l->start, "'%s' requires boolean operands, got %s", name, tname(l->type));
    if (r->type != T_BOOLV)
        return terr(r->start, "'%s' requires boolean operands, got %s", name, tname(r->type));
    bool absorb = kind == K_OR; /* the constant that decides the result */
    if (is_const(l) && l->c.b == absorb) {
        *out = l;
        return SX_OK;
    }
    if (is_const(r) && r->c.b == absorb) {
        *out = r;
        return SX_OK;
    }
    if (is_const(l)) {
        *out = r;
        return SX_OK;
    }
    if (is_const(r)) {
        *out = l;
        return SX_OK;
    }
    node *e = l;
    if (l->kind != kind) {
        TRY(new_node(p, kind, T_BOOLV, optok->start, l->start, &e));
        e->height = 1;
        e->regs = 1;
        TRY(add_kid(p, e, l));
    }
    if (r->kind == kind) {
        for (size_t k = 0; k < r->n_kids; k++)
            TRY(add_kid(p, e, r->kids[k]));
    } else {
        TRY(add_kid(p, e, r));
    }
    *out = e;
    return SX_OK;
}

/* element type check for `x in [..]` */
static sx_status in_elem_ok(const node *x, const node *el)
{
    bool ok = (is_num(x->type) && is_num(el->type)) || x->type == el->type;
    if (!ok)
        return terr(el->start, "cannot compare %s with %s in 'in' list", tname(x->type),
                    tname(el->type));
    return SX_OK;
}

static sx_status build_set(parser *p, node *e, const node *arr)
{
    size_t n = arr->n_kids, m = 0;
    if (e->a->type == T_BOOLV) {
        for (size_t k = 0; k < n; k++) {
            e->set_t = e->set_t || arr->kids[k]->c.b;
            e->set_f = e->set_f || !arr->kids[k]->c.b;
        }
        return SX_OK;
    }
    if (e->a->type == T_INTV) {
        int64_t *v = aalloc(p->arena, (n ? n : 1) * sizeof *v);
        if (!v)
            return oom();
        for (size_t k = 0; k < n; k++) {
            const node *el = arr->kids[k];
            if (el->type == T_INTV)
                v[m++] = el->c.i;
            else if (dbl_exact_i64(el->c.d, &v[m]))
                m++;
        }
        qsort(v, m, sizeof *v, cmp_i64);
        size_t u = 0;
        for (size_t k = 0; k < m; k++)
            if (u == 0 || v[u - 1] != v[k])
                v[u++] = v[k];
        e->set_i = v;
        e->n_set = u;
        if (u > 8 && (uint64_t)v[u - 1] - (uint64_t)v[0] < BM_SPAN) {
            /* dense small set: one bit test per row instead of a binary search */
            uint64_t span = (uint64_t)v[u - 1] - (uint64_t)v[0];
            uint64_t *bm = aalloc(p->arena, (span / 64 + 1) * sizeof *bm);
            if (!bm)
                return oom();
            memset(bm, 0, (span / 64 + 1) * sizeof *bm);
            for (size_t k = 0; k < u; k++)
                sx__bits_set(bm, (uint64_t)v[k] - (uint64_t)v[0]);
            e->set_bm = bm;
            e->bm_span = span;
        }
    } else if (e->a->type == T_DBLV) {
        double *v = aalloc(p->arena, (n ? n : 1) * sizeof *v);
        if (!v)
            return oom();
        for (size_t k = 0; k < n; k++) {
            const node *el = arr->kids[k];
            if (el->type == T_INTV) {
                if (i64_exact_dbl(el->c.i, &v[m]))
                    m++;
            } else if (el->c.d == el->c.d) {
                v[m++] = el->c.d;
            }
        }
        qsort(v, m, sizeof *v, cmp_dbl);
        size_t u = 0;
        for (size_t k = 0; k < m; k++)
            if (u == 0 || v[u - 1] != v[k])
                v[u++] = v[k];
        e->set_d = v;
        e->n_set = u;
    } else {
        const char **v = aalloc(p->arena, (n ? n : 1) * sizeof *v);
        if (!v)
            return oom();
        for (size_t k = 0; k < n; k++)
            if (!arr->kids[k]->c.has_nul) /* a column string never holds a NUL */
                v[m++] = arr->kids[k]->c.s;
        qsort(v, m, sizeof *v, cmp_cstr);
        size_t u = 0;
        for (size_t k = 0; k < m; k++)
            if (u == 0 || strcmp(v[u - 1], v[k]) != 0)
                v[u++] = v[k];
        e->set_s = v;
        e->n_set = u;
    }
    return SX_OK;
}

static sx_status make_in(parser *p, const tok *optok, bool neg, node *x, node *arr, node **out)
{
    if (arr->kind == K_ARRAY)
        jbind(x, arr->n_kids ? arr->kids[0]->type : T_DBLV);
    TRY(need_scalar(x));
    if (arr->kind != K_ARRAY)
        return terr(arr->start, "'%s' requires a literal array on the right, got %s",
                    neg ? "not in" : "in", tname(arr->type));
    for (size_t k = 0; k < arr->n_kids; k++)
        TRY(in_elem_ok(x, arr->kids[k]));
    if (is_const(x)) {
        bool hit = false;
        for (size_t k = 0; k < arr->n_kids; k++)
            hit = hit || fold_cmp(OP_EQ, x, arr->kids[k]);
        return mk_bool(p, hit != neg, optok->start, x->start, out);
    }
    TRY(new_node(p, K_IN, T_BOOLV, optok->start, x->start, out));
    node *e = *out;
    e->op = neg ? 1 : 0;
    e->a = x;
    TRY(build_set(p, e, arr));
    return finish2(e, x, NULL);
}

/* Splits the compiled items it[0..n) (bytes, PAT_ONE, PAT_ANY) at PAT_ANY into e->segs, with the
 * Shift-And tables of the segments holding `_`. Once per expression, in the arena: a segment of
 * m items takes at most min(m + 1, 257) * ceil(m / 64) + 32 words of tables. */
static sx_status build_segs(parser *p, node *e, const int16_t *it, size_t n)
{
    size_t ns = 0;
    for (size_t k = 0; k < n; k++)
        ns += it[k] != PAT_ANY && (k == 0 || it[k - 1] == PAT_ANY);
    lseg *segs = aalloc(p->arena, (ns + 1) * sizeof *segs);
    if (!segs)
        return oom();
    memset(segs, 0, (ns + 1) * sizeof *segs);
    size_t si = 0;
    for (size_t k = 0; k < n;) {
        if (it[k] == PAT_ANY) {
            k++;
            continue;
        }
        size_t a = k;
        bool one = false;
        for (; k < n && it[k] != PAT_ANY; k++)
            one = one || it[k] == PAT_ONE;
        lseg *g = &segs[si++];
        g->len = k - a;
        g->items = it + a;
        g->has_one = one;
        if (!one) {
            unsigned char *bytes = aalloc(p->arena, g->len);
            if (!bytes)
                return oom();
            for (size_t j = 0; j < g->len; j++)
                bytes[j] = (unsigned char)it[a + j];
            g->lit = bytes;
            continue;
        }
        size_t nw = (g->len + 63) / 64, rows = 1;
        uint8_t *cls = aalloc(p->arena, 256);
        if (!cls)
            return oom();
        memset(cls, 0, 256);
        for (size_t j = 0; j < g->len; j++) {
            /* the bytes 1..255 fit rows 1..255 (a NUL made the pattern LK_NONE) */
            unsigned char v = (unsigned char)g->items[j];
            if (g->items[j] != PAT_ONE && cls[v] == 0 && rows < 256)
                cls[v] = (uint8_t)rows++;
        }
        uint64_t *masks = aalloc(p->arena, (rows + 1) * nw * sizeof *masks);
        if (!masks)
            return oom();
        memset(masks, 0, (rows + 1) * nw * sizeof *masks);
        uint64_t *onev = masks + rows * nw;
        for (size_t j = 0; j < g->len; j++) {
            uint64_t bit = (uint64_t)1 << (j % 64);
            if (g->items[j] == PAT_ONE)
                onev[j / 64] |= bit;
            else
                masks[(size_t)cls[(unsigned char)g->items[j]] * nw + j / 64] |= bit;
        }
        g->nw = nw;
        g->cls = cls;
        g->masks = masks;
        g->one = onev;
        if (2 * nw > p->like_words)
            p->like_words = 2 * nw;
    }
    e->segs = segs;
    e->n_segs = ns;
    e->like_lead = n > 0 && it[0] == PAT_ANY;
    e->like_trail = n > 0 && it[n - 1] == PAT_ANY;
    return SX_OK;
}

/* Compiles the like pattern into e: `%` any run, `_` one character, `\%` `\_` `\\` literal. */
static sx_status compile_like(parser *p, node *e, const lit *pat)
{
    int16_t *it = aalloc(p->arena, (pat->len + 1) * sizeof *it);
    char *lits = aalloc(p->arena, pat->len + 1);
    if (!it || !lits)
        return oom();
    size_t n = 0, n_any = 0, n_one = 0, nl = 0;
    bool nul = false;
    for (size_t k = 0; k < pat->len; k++) {
        unsigned char c = (unsigned char)pat->s[k];
        if (c == '\\' && k + 1 < pat->len &&
            (pat->s[k + 1] == '%' || pat->s[k + 1] == '_' || pat->s[k + 1] == '\\')) {
            it[n++] = (int16_t)(unsigned char)pat->s[++k];
            lits[nl++] = pat->s[k];
        } else if (c == '%') {
            if (n == 0 || it[n - 1] != PAT_ANY) {
                it[n++] = PAT_ANY;
                n_any++;
            }
        } else if (c == '_') {
            it[n++] = PAT_ONE;
            n_one++;
        } else {
            it[n++] = (int16_t)c;
            lits[nl++] = (char)c;
            nul = nul || c == 0;
        }
    }
    lits[nl] = '\0';
    e->c.s = lits;
    e->c.len = nl;
    bool lead = n > 0 && it[0] == PAT_ANY, trail = n > 0 && it[n - 1] == PAT_ANY;
    bool simple = n_one == 0; /* only '%' wildcards */
    if (nul)
        e->mode = LK_NONE; /* needs a NUL byte, which no column string holds */
    else if (simple && n_any == 0)
        e->mode = LK_EXACT;
    else if (simple && n == 1)
        e->mode = LK_ALL;
    else if (simple && n_any == 1 && trail)
        e->mode = LK_PREFIX;
    else if (simple && n_any == 1 && lead)
        e->mode = LK_SUFFIX;
    else if (simple && n_any == 2 && lead && trail)
        e->mode = LK_INFIX;
    else
        e->mode = LK_GENERAL;
    return e->mode == LK_GENERAL ? build_segs(p, e, it, n) : SX_OK;
}

static sx_status make_like(parser *p, const tok *optok, node *x, node *pat, node **out)
{
    jbind(x, T_STRV);
    TRY(need_scalar(x));
    TRY(need_scalar(pat));
    if (x->type != T_STRV)
        return terr(optok->start, "'like' requires a VARCHAR operand, got %s", tname(x->type));
    if (!is_const(pat) || pat->type != T_STRV)
        return terr(pat->start, "'like' requires a string literal pattern");
    TRY(new_node(p, K_LIKE, T_BOOLV, optok->start, x->start, out));
    node *e = *out;
    e->a = x;
    TRY(compile_like(p, e, &pat->c));
    if (is_const(x)) {
        uint64_t *sc = NULL;
        if (p->like_words) {
            sc = aalloc(p->arena, p->like_words * sizeof *sc);
            if (!sc)
                return oom();
        }
        bool v = !x->c.has_nul && like_match(e, x->c.s, sc);
        return mk_bool(p, v, optok->start, x->start, out);
    }
    return finish2(e, x, NULL);
}

/* ------------------------------------------------------------------ parser */

static sx_status parse_expr(parser *p, int min_prec, node **out);
static sx_status parse_rest(parser *p, node *left, int min_prec, node **out);

/* The schema's scalar field names, "a, b, c", into buf (cut with "..." when they do not fit;
 * "none" when there are none): what an unknown-field message offers instead. */
static void field_list(const sx__expr_schema *s, char *buf, size_t cap)
{
    size_t o = 0, n = 0;
    buf[0] = '\0';
    for (size_t k = 0; k < s->n_fields; k++) {
        if (!s->names[k] || sx_field_is_vector(s->types[k]))
            continue;
        size_t len = strlen(s->names[k]);
        if (o + len + 2 + 5 > cap) { /* room for ", " and ", ..." */
            (void)snprintf(buf + o, cap - o, "%s...", n ? ", " : "");
            return;
        }
        o += (size_t)snprintf(buf + o, cap - o, "%s%s", n ? ", " : "", s->names[k]);
        n++;
    }
    if (n == 0)
        (void)snprintf(buf, cap, "none");
}

#define MAX_JPATH 16

/* `field["key"][0]...` (p->cur is the first '['): a K_JSON node over VARCHAR column idx. */
static sx_status parse_jpath(parser *p, size_t idx, size_t start, node **out)
{
    jstep steps[MAX_JPATH];
    size_t n = 0;
    while (p->cur.kind == T_LB) {
        if (n == MAX_JPATH)
            return perr(p->cur.start, "JSON path longer than %d steps", MAX_JPATH);
        TRY(advance(p));
        tok k = p->cur;
        if (k.kind == T_STR) {
            char *buf = aalloc(p->arena, k.dlen + 1);
            if (!buf)
                return oom();
            size_t len;
            TRY(decode_string(p, &k, buf, &len));
            buf[len] = '\0';
            steps[n].key = buf;
            steps[n].idx = 0;
        } else if (k.kind == T_INT && k.u <= (uint64_t)INT64_MAX) {
            steps[n].key = NULL;
            steps[n].idx = (int64_t)k.u;
        } else {
            return perr(k.start, "a JSON path step must be a \"key\" or an array index");
        }
        n++;
        TRY(advance(p));
        if (p->cur.kind != T_RB)
            return perr(p->cur.start, "expected ']' after a JSON path step");
        TRY(advance(p));
    }
    jstep *path = aalloc(p->arena, n * sizeof *path);
    if (!path)
        return oom();
    memcpy(path, steps, n * sizeof *path);
    p->used[idx] = true;
    TRY(new_node(p, K_JSON, T_NONE, start, start, out));
    (*out)->field = idx;
    (*out)->jpath = path;
    (*out)->n_jpath = n;
    (*out)->may_unk = true;
    return SX_OK;
}

/* The functions over JSON / ARRAY values (Milvus Plan.g4's JSONContains*, ArrayLength; json_
 * and array_ spellings are the same functions, in lower or upper case). -1 if not one. */
static int func_kind(const char *name, size_t nl)
{
    static const struct {
        const char *name;
        int kind;
    } fns[] = {
        { "json_contains", JF_CONTAINS }, { "array_contains", JF_CONTAINS },
        { "json_contains_all", JF_ALL },  { "array_contains_all", JF_ALL },
        { "json_contains_any", JF_ANY },  { "array_contains_any", JF_ANY },
        { "array_length", JF_LENGTH },
    };

    for (size_t i = 0; i < sizeof fns / sizeof fns[0]; i++) {
        if (strlen(fns[i].name) != nl)
            continue;
        bool lower = memcmp(fns[i].name, name, nl) == 0, upper = true;
        for (size_t k = 0; k < nl && upper; k++)
            upper = name[k] == (fns[i].name[k] >= 'a' && fns[i].name[k] <= 'z'
                                    ? (char)(fns[i].name[k] - 'a' + 'A')
                                    : fns[i].name[k]);
        if (lower || upper)
            return fns[i].kind;
    }
    return -1;
}

/* `fn(arg[, literal | [literals]])` (p->cur is the function's name). The first argument is a
 * VARCHAR field holding JSON text (a JSON or ARRAY field, the dynamic field) or a JSON path in one;
 * it becomes a K_JSON node (a bare field: the empty path). json_contains(x, v): x is an array
 * holding an element equal to v; _all / _any: holding every / some element of the literal array;
 * equality is by JSON type and value (1 and 1.0 are equal numbers; "1" is not 1). A row whose value
 * is not an array is FALSE for the contains functions (as Milvus) and has no array_length (UNKNOWN
 * for a comparison on it, like a missing JSON key). */
static sx_status parse_call(parser *p, int fk, const char *name, size_t nl, node **out)
{
    size_t start = p->cur.start;
    int wn = (int)(nl > 64 ? 64 : nl);
    if (++p->depth > MAX_DEPTH)
        return perr(start, "expression nested too deeply (max depth %d)", MAX_DEPTH);
    TRY(advance(p)); /* the name */
    TRY(advance(p)); /* '(' */
    node *arg;
    TRY(parse_expr(p, PREC_OR, &arg));
    if (arg->kind == K_FIELD && arg->type == T_STRV) {
        size_t idx = arg->field;
        TRY(new_node(p, K_JSON, T_NONE, arg->start, arg->start, &arg));
        arg->field = idx;
        arg->may_unk = true;
    }
    if (!junbound(arg))
        return terr(arg->start,
                    "%.*s needs an ARRAY or JSON field, or a JSON path, as its first argument", wn,
                    name);
    node *e;
    if (fk == JF_LENGTH) {
        TRY(new_node(p, K_ALEN, T_INTV, start, start, &e));
        e->may_unk = true;
    } else {
        if (p->cur.kind != T_COMMA)
            return perr(p->cur.start, "%.*s takes two arguments: expected ','", wn, name);
        TRY(advance(p));
        node *v;
        TRY(parse_expr(p, PREC_OR, &v));
        TRY(new_node(p, K_JCONT, T_BOOLV, start, start, &e));
        e->op = (uint8_t)fk;
        if (fk == JF_CONTAINS) {
            if (!is_const(v) || v->type == T_ARRV)
                return terr(v->start, "the second argument of %.*s must be a literal", wn, name);
            TRY(need_scalar(v));
            TRY(add_kid(p, e, v));
        } else {
            if (v->kind != K_ARRAY)
                return terr(v->start, "the second argument of %.*s must be an array literal", wn,
                            name);
            for (size_t k = 0; k < v->n_kids; k++)
                TRY(add_kid(p, e, v->kids[k]));
        }
    }
    if (p->cur.kind != T_RP) {
        if (p->cur.kind == T_END)
            return perr(p->cur.start, "missing ')' for the call of %.*s at %zu", wn, name, start);
        return unexpected(p, &p->cur);
    }
    e->a = arg;
    e->height = 2;
    if (e->kind == K_JCONT && p->schema->nullable && p->schema->nullable[arg->field])
        e->may_unk = true; /* a NULL row is UNKNOWN */
    p->depth--;
    *out = e;
    return advance(p);
}

static sx_status parse_unary(parser *p, node **out);

/* `exists x["k"]...` (p->cur is `exists`): TRUE where the JSON text of the row holds a value at
 * the path (JSON null included), FALSE elsewhere (not JSON, key missing); never UNKNOWN. Binds
 * like a prefix operator. */
static sx_status parse_exists(parser *p, node **out)
{
    size_t start = p->cur.start;
    if (++p->depth > MAX_DEPTH)
        return perr(start, "expression nested too deeply (max depth %d)", MAX_DEPTH);
    TRY(advance(p));
    node *arg;
    TRY(parse_unary(p, &arg));
    if (!junbound(arg) || arg->n_jpath == 0)
        return terr(arg->start, "'exists' needs a JSON path (exists field[\"key\"])");
    node *e;
    TRY(new_node(p, K_JCONT, T_BOOLV, start, start, &e));
    e->op = JF_EXISTS;
    e->a = arg;
    e->height = 2;
    p->depth--;
    *out = e;
    return SX_OK;
}

static sx_status parse_field(parser *p, node **out)
{
    tok t = p->cur;
    const char *name = p->src + t.start;
    size_t nl = t.end - t.start;
    tok nx;
    TRY(lex(p, t.end, &nx));
    if (nx.kind == T_LP) {
        int fk = func_kind(name, nl);
        if (fk < 0)
            return perr(t.start, "function calls are not supported: %.*s(...)",
                        (int)(nl > 64 ? 64 : nl), name);
        return parse_call(p, fk, name, nl, out);
    }
    if ((nl == 6 && (memcmp(name, "exists", 6) == 0 || memcmp(name, "EXISTS", 6) == 0)) &&
        nx.kind != T_END)
        return parse_exists(p, out);
    size_t idx = SIZE_MAX;
    for (size_t k = 0; k < p->schema->n_fields; k++) {
        const char *fn = p->schema->names[k];
        if (fn && strlen(fn) == nl && memcmp(fn, name, nl) == 0) {
            idx = k;
            break;
        }
    }
    if (idx == SIZE_MAX) {
        char list[200];
        field_list(p->schema, list, sizeof list);
        return terr(t.start, "no field named \"%.*s\" (the fields a filter can use: %s)",
                    (int)(nl > 64 ? 64 : nl), name, list);
    }
    if (nx.kind == T_LB) {
        if (p->schema->types[idx] != SX_FIELD_VARCHAR)
            return terr(nx.start, "field \"%.*s\" is not JSON: [...] needs a JSON field",
                        (int)(nl > 64 ? 64 : nl), name);
        TRY(advance(p));
        return parse_jpath(p, idx, t.start, out);
    }
    int type;
    switch (p->schema->types[idx]) {
    case SX_FIELD_INT64:
        type = T_INTV;
        break;
    case SX_FIELD_DOUBLE:
        type = T_DBLV;
        break;
    case SX_FIELD_BOOL:
        type = T_BOOLV;
        break;
    case SX_FIELD_VARCHAR:
        type = T_STRV;
        break;
    default:
        return terr(t.start, "field \"%.*s\" is a vector field and cannot be used in a filter",
                    (int)(nl > 64 ? 64 : nl), name);
    }
    TRY(advance(p));
    bool nullable = p->schema->nullable && p->schema->nullable[idx];
    if (p->cur.kind == T_IS) {
        /* `field is [not] null`: TRUE / FALSE by the NULL bit (a field that is not nullable is
         * never NULL: a constant) */
        TRY(advance(p));
        bool neg = p->cur.kind == T_NOT;
        if (neg)
            TRY(advance(p));
        if (p->cur.kind != T_NULL)
            return perr(p->cur.start, "expected 'null' after 'is%s'", neg ? " not" : "");
        TRY(advance(p));
        if (!nullable)
            return mk_bool(p, neg, t.start, t.start, out);
        p->used[idx] = true;
        TRY(new_node(p, K_ISNULL, T_BOOLV, t.start, t.start, out));
        (*out)->field = idx;
        (*out)->op = neg ? 1 : 0;
        return SX_OK;
    }
    p->used[idx] = true;
    TRY(new_node(p, K_FIELD, type, t.start, t.start, out));
    (*out)->field = idx;
    (*out)->may_unk = nullable;
    return SX_OK;
}

static sx_status parse_array(parser *p, node **out)
{
    tok open = p->cur;
    if (++p->depth > MAX_DEPTH)
        return perr(open.start, "expression nested too deeply (max depth %d)", MAX_DEPTH);
    TRY(advance(p));
    node *arr;
    TRY(new_node(p, K_ARRAY, T_ARRV, open.start, open.start, &arr));
    while (p->cur.kind != T_RB) {
        node *el;
        TRY(parse_expr(p, PREC_OR, &el));
        if (el->type == T_ARRV)
            return terr(el->start, "nested arrays are not supported");
        if (!is_const(el))
            return terr(el->start, "array elements must be literals");
        TRY(need_scalar(el));
        TRY(add_kid(p, arr, el));
        if (p->cur.kind == T_COMMA) {
            TRY(advance(p));
        } else if (p->cur.kind != T_RB) {
            if (p->cur.kind == T_END)
                return perr(p->cur.start, "missing ']' for the '[' at %zu", open.start);
            return unexpected(p, &p->cur);
        }
    }
    TRY(advance(p));
    arr->height = 1;
    arr->regs = 1;
    p->depth--;
    *out = arr;
    return SX_OK;
}

static sx_status parse_primary(parser *p, node **out)
{
    tok t = p->cur;
    switch (t.kind) {
    case T_INT:
        if (t.u > (uint64_t)INT64_MAX) {
            if (t.u != (uint64_t)1 << 63 || t.start != p->neg_lit_pos)
                return perr(t.start, "integer literal out of range");
        }
        TRY(mk_const(p, T_INTV, t.start, t.start, out));
        (*out)->c.i = t.u > (uint64_t)INT64_MAX ? INT64_MIN : (int64_t)t.u;
        (*out)->big = t.u > (uint64_t)INT64_MAX;
        return advance(p);
    case T_FLOAT:
        TRY(mk_const(p, T_DBLV, t.start, t.start, out));
        (*out)->c.d = t.d;
        return advance(p);
    case T_TRUE:
    case T_FALSE:
        TRY(mk_bool(p, t.kind == T_TRUE, t.start, t.start, out));
        return advance(p);
    case T_STR: {
        char *buf = aalloc(p->arena, t.dlen + 1);
        if (!buf)
            return oom();
        size_t len;
        TRY(decode_string(p, &t, buf, &len));
        TRY(mk_const(p, T_STRV, t.start, t.start, out));
        (*out)->c.s = buf;
        (*out)->c.len = len;
        (*out)->c.has_nul = memchr(buf, 0, len) != NULL;
        return advance(p);
    }
    case T_LP: {
        if (++p->depth > MAX_DEPTH)
            return perr(t.start, "expression nested too deeply (max depth %d)", MAX_DEPTH);
        TRY(advance(p));
        TRY(parse_expr(p, PREC_OR, out));
        if (p->cur.kind != T_RP) {
            if (p->cur.kind == T_END)
                return perr(p->cur.start, "missing ')' for the '(' at %zu", t.start);
            return unexpected(p, &p->cur);
        }
        p->depth--;
        return advance(p);
    }
    case T_LB:
        return parse_array(p, out);
    case T_IDENT:
        return parse_field(p, out);
    case T_LBRACE:
        return perr(t.start, "template placeholders ({name}) are not supported yet");
    case T_META:
        return perr(t.start, "the dynamic field $meta is not supported");
    default:
        return unexpected(p, &t);
    }
}

static sx_status parse_unary(parser *p, node **out)
{
    tok t = p->cur;
    if (t.kind != T_SUB && t.kind != T_ADD && t.kind != T_NOT && t.kind != T_BNOT)
        return parse_primary(p, out);
    if (++p->depth > MAX_DEPTH)
        return perr(t.start, "expression nested too deeply (max depth %d)", MAX_DEPTH);
    if (t.kind == T_BNOT)
        return perr(t.start, "operator '~' is not supported");
    TRY(advance(p));
    if (t.kind == T_SUB)
        p->neg_lit_pos = p->cur.start;
    node *x;
    TRY(parse_expr(p, PREC_POW, &x));
    if (t.kind == T_NOT && x->type != T_BOOLV && x->type != T_ARRV) {
        /* Milvus reads `not a > 1` as `(not a) > 1`, a type error for a non-bool `a`; where that
         * reading cannot type-check, `not` takes the whole comparison instead. */
        TRY(parse_rest(p, x, PREC_EQ, &x));
    }
    switch (t.kind) {
    case T_SUB:
        TRY(make_neg(p, &t, x, out));
        break;
    case T_ADD:
        TRY(need_scalar(x));
        if (!is_num(x->type))
            return terr(t.start, "unary '+' requires a numeric operand, got %s", tname(x->type));
        *out = x;
        break;
    default:
        TRY(make_not(p, t.start, x, out));
        break;
    }
    p->depth--;
    return SX_OK;
}

/* Binding power of the operator at the current token (0: none); `not in` needs a peek. */
static sx_status binop(parser *p, int *prec, bool *not_in)
{
    *not_in = false;
    switch (p->cur.kind) {
    case T_OR:
        *prec = PREC_OR;
        break;
    case T_AND:
        *prec = PREC_AND;
        break;
    case T_BOR:
        *prec = PREC_BOR;
        break;
    case T_BXOR:
        *prec = PREC_BXOR;
        break;
    case T_BAND:
        *prec = PREC_BAND;
        break;
    case T_EQ:
    case T_NE:
        *prec = PREC_EQ;
        break;
    case T_LT:
    case T_LE:
    case T_GT:
    case T_GE:
        *prec = PREC_REL;
        break;
    case T_IN:
        *prec = PREC_IN;
        break;
    case T_NOT: {
        tok nx;
        TRY(lex(p, p->cur.end, &nx));
        *prec = nx.kind == T_IN ? PREC_IN : 0;
        *not_in = nx.kind == T_IN;
        break;
    }
    case T_SHL:
    case T_SHR:
        *prec = PREC_SHIFT;
        break;
    case T_ADD:
    case T_SUB:
        *prec = PREC_ADD;
        break;
    case T_MUL:
    case T_DIV:
    case T_MOD:
        *prec = PREC_MUL;
        break;
    case T_POW:
        *prec = PREC_POW;
        break;
    case T_LIKE:
    case T_REGEX:
    case T_NREGEX:
        *prec = PREC_LIKE;
        break;
    default:
        *prec = 0;
        break;
    }
    return SX_OK;
}

static bool is_rel(int kind)
{
    return kind == T_LT || kind == T_LE || kind == T_GT || kind == T_GE;
}

static sx_status parse_rest(parser *p, node *left, int min_prec, node **out)
{
    for (;;) {
        int prec;
        bool not_in;
        TRY(binop(p, &prec, &not_in));
        if (prec == 0 || prec < min_prec)
            break;
        tok op = p->cur;
        TRY(advance(p));
        if (not_in)
            TRY(advance(p));
        node *r = NULL, *hi = NULL, *c1 = NULL, *c2 = NULL;
        switch (op.kind) {
        case T_OR:
        case T_AND:
            TRY(parse_expr(p, prec + 1, &r));
            TRY(make_logic(p, op.kind == T_AND ? K_AND : K_OR, &op, left, r, &left));
            break;
        case T_EQ:
        case T_NE:
            TRY(parse_expr(p, prec + 1, &r));
            TRY(make_cmp(p, &op, left, r, &left));
            break;
        case T_LT:
        case T_LE:
        case T_GT:
        case T_GE:
            TRY(parse_expr(p, prec + 1, &r));
            if (!is_rel(p->cur.kind)) {
                TRY(make_cmp(p, &op, left, r, &left));
                break;
            }
            {
                /* chained range `lo < x <= hi` / `hi > x >= lo`: both comparisons share x */
                tok op2 = p->cur;
                bool up1 = op.kind == T_LT || op.kind == T_LE;
                bool up2 = op2.kind == T_LT || op2.kind == T_LE;
                if (up1 != up2)
                    return perr(op2.start, "a chained comparison must keep one direction");
                TRY(advance(p));
                TRY(parse_expr(p, prec + 1, &hi));
                TRY(make_cmp(p, &op, left, r, &c1));
                TRY(make_cmp(p, &op2, r, hi, &c2));
                TRY(make_logic(p, K_AND, &op2, c1, c2, &left));
            }
            break;
        case T_IN:
        case T_NOT:
            TRY(parse_expr(p, prec + 1, &r));
            TRY(make_in(p, &op, not_in, left, r, &left));
            break;
        case T_ADD:
        case T_SUB:
        case T_MUL:
        case T_DIV:
        case T_MOD:
        case T_POW: {
            static const int map[] = { [T_ADD] = OP_ADD, [T_SUB] = OP_SUB, [T_MUL] = OP_MUL,
                                       [T_DIV] = OP_DIV, [T_MOD] = OP_MOD, [T_POW] = OP_POW };
            TRY(parse_expr(p, prec + 1, &r));
            TRY(make_arith(p, &op, map[op.kind], left, r, &left));
            break;
        }
        case T_LIKE:
            TRY(parse_expr(p, prec + 1, &r));
            TRY(make_like(p, &op, left, r, &left));
            break;
        default: {
            char sn[16];
            snippet(p->src, op.start, op.end, sn, sizeof sn);
            return perr(op.start, "operator '%s' is not supported", sn);
        }
        }
    }
    *out = left;
    return SX_OK;
}

static sx_status parse_expr(parser *p, int min_prec, node **out)
{
    node *left = NULL;
    TRY(parse_unary(p, &left));
    return parse_rest(p, left, min_prec, out);
}

static sx_status parse_all(parser *p, node **out)
{
    TRY(lex(p, 0, &p->cur));
    node *root;
    TRY(parse_expr(p, PREC_OR, &root));
    if (p->cur.kind != T_END)
        return unexpected(p, &p->cur);
    jbind(root, T_BOOLV);
    TRY(need_scalar(root));
    if (root->type != T_BOOLV)
        return terr(root->start, "the expression must be boolean, got %s", tname(root->type));
    *out = root;
    return SX_OK;
}

sx_status sx__expr_parse(const char *src, const sx__expr_schema *schema, sx__expr **out)
{
    if (!src || !schema || !out || (schema->n_fields && (!schema->names || !schema->types)))
        return sx__err(SX_EINVAL, "sx__expr_parse: NULL argument");
    size_t len = strnlen(src, (size_t)MAX_LEN + 1);
    if (len > MAX_LEN)
        return perr(MAX_LEN, "expression longer than %d bytes", MAX_LEN);
    size_t k = 0;
    while (k < len && (src[k] == ' ' || src[k] == '\t' || src[k] == '\r' || src[k] == '\n'))
        k++;
    if (k == len)
        return sx__err(SX_EINVAL, "empty filter expression");

    sx_status rc;
    sx__expr *e = sx__calloc(1, sizeof *e);
    if (!e)
        return oom();
    parser p = { .src = src, .len = len, .schema = schema, .arena = &e->arena };
    p.neg_lit_pos = SIZE_MAX;
    p.used = aalloc(&e->arena, schema->n_fields + 1);
    if (!p.used) {
        rc = oom();
        goto fail;
    }
    memset(p.used, 0, schema->n_fields + 1);
    rc = parse_all(&p, &e->root);
    if (rc != SX_OK)
        goto fail;
    for (k = 0; k < schema->n_fields; k++)
        e->n_used += p.used[k];
    e->used = aalloc(&e->arena, (e->n_used + 1) * sizeof *e->used);
    e->used_types = aalloc(&e->arena, (e->n_used + 1) * sizeof *e->used_types);
    if (!e->used || !e->used_types) {
        rc = oom();
        goto fail;
    }
    e->like_words = p.like_words;
    e->n_used = 0;
    for (k = 0; k < schema->n_fields; k++) {
        if (p.used[k]) {
            e->used[e->n_used] = k;
            e->used_types[e->n_used++] = schema->types[k];
        }
    }
    *out = e;
    return SX_OK;
fail:
    sx__expr_free(e);
    return rc;
}

void sx__expr_free(sx__expr *e)
{
    if (!e)
        return;
    afree(e->arena);
    sx__free(e);
}

int sx__expr_point_lookup(const sx__expr *e,
                          size_t *n,
                          const int64_t **ints,
                          const char *const **strs)
{
    const node *r = e ? e->root : NULL;
    if (!r || (r->kind != K_CMPC && r->kind != K_IN) || r->a->kind != K_FIELD)
        return -1;
    if (r->a->type != T_INTV && r->a->type != T_STRV)
        return -1;
    if (r->kind == K_CMPC) {
        if (r->op != OP_EQ)
            return -1;
        if (r->a->type == T_INTV) {
            *ints = &r->c.i;
            *strs = NULL;
            *n = 1;
        } else {
            *ints = NULL;
            *strs = &r->c.s;
            *n = r->c.has_nul ? 0 : 1;
        }
    } else {
        if (r->op != 0)
            return -1;
        *n = r->n_set;
        *ints = r->a->type == T_INTV ? r->set_i : NULL;
        *strs = r->a->type == T_STRV ? r->set_s : NULL;
    }
    return (int)r->a->field;
}

/* ------------------------------------------------------------------ evaluator */

typedef struct reg {
    int64_t *iv; /* CHUNK values; iv and dv alias (a node writes one type, its parent reads it) */
    double *dv;
    uint64_t *t; /* CW words: TRUE rows */
    uint64_t *u; /* CW words: UNKNOWN rows (predicates) / invalid rows (values) */
} reg;

typedef struct ectx {
    const sx__colref *cols;
    reg *regs;
    uint64_t *like_sc; /* sx__expr.like_words words for like_general */
    ablock **jarena;   /* K_JSON strings of the current chunk (freed after each chunk) */
    bool *jfail;       /* set when the JSON scratch could not be allocated */
} ectx;

typedef struct vres {
    bool scalar; /* K_CONST: si / sd */
    int64_t si;
    double sd;
    const int64_t *i;
    const double *d;
    const char *const *s;
    const uint64_t *inv; /* invalid rows; NULL when every row is valid */
} vres;

static inline size_t nwords(size_t m)
{
    return (m + 63) / 64;
}

static inline uint64_t lastmask(size_t m)
{
    return (m & 63) ? (((uint64_t)1 << (m & 63)) - 1) : ~(uint64_t)0;
}

/* t[w] = bits of COND over rows i = 64w .. 64w+63 (< m); COND reads `i` */
#define BITS_LOOP(t, m, COND)                           \
 do {                                                   \
  size_t nw_ = nwords(m);                               \
  for (size_t w_ = 0; w_ < nw_; w_++) {                 \
   size_t b_ = w_ * 64, e_ = (m)-b_ < 64 ? (m)-b_ : 64; \
   uint64_t bits_ = 0;                                  \
   if (e_ == 64) {                                      \
    for (size_t j_ = 0; j_ < 64; j_++) {                \
     size_t i = b_ + j_;                                \
     bits_ |= (uint64_t)(COND) << j_;                   \
    }                                                   \
   } else {                                             \
    for (size_t j_ = 0; j_ < e_; j_++) {                \
     size_t i = b_ + j_;                                \
     bits_ |= (uint64_t)(COND) << j_;                   \
    }                                                   \
   }                                                    \
   (t)[w_] = bits_;                                     \
  }                                                     \
 } while (0)

#define CMP6(t, m, op, A, B)    \
 do {                           \
  switch (op) {                 \
  case OP_EQ:                   \
   BITS_LOOP(t, m, (A) == (B)); \
   break;                       \
  case OP_NE:                   \
   BITS_LOOP(t, m, (A) != (B)); \
   break;                       \
  case OP_LT:                   \
   BITS_LOOP(t, m, (A) < (B));  \
   break;                       \
  case OP_LE:                   \
   BITS_LOOP(t, m, (A) <= (B)); \
   break;                       \
  case OP_GT:                   \
   BITS_LOOP(t, m, (A) > (B));  \
   break;                       \
  default:                      \
   BITS_LOOP(t, m, (A) >= (B)); \
   break;                       \
  }                             \
 } while (0)

static void eval_val(const ectx *x, const node *e, size_t r, size_t row0, size_t m, vres *v);
static bool eval_bool(const ectx *x, const node *e, size_t r, size_t row0, size_t m);

static void fill_words(uint64_t *t, size_t m, bool v)
{
    size_t nw = nwords(m);
    for (size_t w = 0; w < nw; w++)
        t[w] = v ? ~(uint64_t)0 : 0;
    t[nw - 1] &= lastmask(m);
}

/* Copies inv into g->u and clears those rows from g->t; returns whether there are any. */
static bool apply_inv(reg *g, const uint64_t *inv, size_t m)
{
    if (!inv)
        return false;
    size_t nw = nwords(m);
    for (size_t w = 0; w < nw; w++) {
        uint64_t u = inv[w];
        g->u[w] = u;
        g->t[w] &= ~u;
    }
    return true;
}

/* The NULL bits of rows [row0, row0 + m) of nullable field f into dst (CW words, zero past m);
 * false (dst untouched) when the block has none. row0 is a multiple of 64 (of CHUNK). Atomic
 * loads: a growing segment's writer may be setting bits of later rows in the same words. */
static bool load_nulls(const ectx *x, size_t f, size_t row0, size_t m, uint64_t *dst)
{
    const uint64_t *src = x->cols[f].nulls;
    if (!src || m == 0)
        return false;
    size_t nw = nwords(m);
    for (size_t w = 0; w < nw; w++)
        dst[w] = __atomic_load_n(&src[row0 / 64 + w], __ATOMIC_RELAXED);
    dst[nw - 1] &= lastmask(m);
    return true;
}

/* g->u = a | b (either may be NULL or g->u itself); returns g->u, or NULL if both are NULL */
static const uint64_t *or_inv(reg *g, const uint64_t *a, const uint64_t *b, size_t m)
{
    if (!a && !b)
        return NULL;
    size_t nw = nwords(m);
    for (size_t w = 0; w < nw; w++)
        g->u[w] = (a ? a[w] : 0) | (b ? b[w] : 0);
    return g->u;
}

/* makes v a vector in g (broadcasting a scalar); converts INT64 values to double if want_dbl */
static void vec_num(vres *v, int type, bool want_dbl, reg *g, size_t m)
{
    if (v->scalar) {
        if (want_dbl || type == T_DBLV) {
            double c = type == T_INTV ? (double)v->si : v->sd;
            for (size_t k = 0; k < m; k++)
                g->dv[k] = c;
            v->d = g->dv;
        } else {
            for (size_t k = 0; k < m; k++)
                g->iv[k] = v->si;
            v->i = g->iv;
        }
        v->scalar = false;
        return;
    }
    if (want_dbl && type == T_INTV) {
        const int64_t *src = v->i;
        for (size_t k = 0; k < m; k++)
            g->dv[k] = (double)src[k];
        v->d = g->dv;
    }
}

static void eval_arith_int(const node *e, vres *a, vres *b, reg *g, size_t m, vres *v)
{
    int64_t *o = g->iv;
    const int64_t *ai = a->i;
    const uint64_t *inv = v->inv;
    if (b->scalar) {
        int64_t c = b->si;
        switch (e->op) {
        case OP_ADD:
            for (size_t k = 0; k < m; k++)
                o[k] = wadd(ai[k], c);
            break;
        case OP_SUB:
            for (size_t k = 0; k < m; k++)
                o[k] = wsub(ai[k], c);
            break;
        case OP_MUL:
            for (size_t k = 0; k < m; k++)
                o[k] = wmul(ai[k], c);
            break;
        default:
            if (c == 0) {
                fill_words(g->u, m, true);
                inv = g->u;
                for (size_t k = 0; k < m; k++)
                    o[k] = 0;
            } else if (e->op == OP_DIV) {
                for (size_t k = 0; k < m; k++)
                    o[k] = idiv(ai[k], c);
            } else {
                for (size_t k = 0; k < m; k++)
                    o[k] = imod(ai[k], c);
            }
            break;
        }
    } else {
        const int64_t *bi = b->i;
        if (e->op == OP_DIV || e->op == OP_MOD) {
            uint64_t zero[CW];
            uint64_t any = 0;
            BITS_LOOP(zero, m, bi[i] == 0);
            for (size_t w = 0; w < nwords(m); w++)
                any |= zero[w];
            if (any) {
                for (size_t w = 0; w < nwords(m); w++)
                    g->u[w] = (inv ? inv[w] : 0) | zero[w];
                inv = g->u;
            }
        }
        switch (e->op) {
        case OP_ADD:
            for (size_t k = 0; k < m; k++)
                o[k] = wadd(ai[k], bi[k]);
            break;
        case OP_SUB:
            for (size_t k = 0; k < m; k++)
                o[k] = wsub(ai[k], bi[k]);
            break;
        case OP_MUL:
            for (size_t k = 0; k < m; k++)
                o[k] = wmul(ai[k], bi[k]);
            break;
        case OP_DIV:
            for (size_t k = 0; k < m; k++)
                o[k] = idiv(ai[k], bi[k]);
            break;
        default:
            for (size_t k = 0; k < m; k++)
                o[k] = imod(ai[k], bi[k]);
            break;
        }
    }
    v->i = o;
    v->inv = inv;
}

static void eval_arith_dbl(const node *e, vres *a, vres *b, reg *g, size_t m, vres *v)
{
    double *o = g->dv;
    const double *ad = a->d;
    if (b->scalar) {
        double c = e->b->type == T_INTV ? (double)b->si : b->sd;
        switch (e->op) {
        case OP_ADD:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] + c;
            break;
        case OP_SUB:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] - c;
            break;
        case OP_MUL:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] * c;
            break;
        case OP_DIV:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] / c;
            break;
        default:
            for (size_t k = 0; k < m; k++)
                o[k] = darith(e->op, ad[k], c);
            break;
        }
    } else {
        const double *bd = b->d;
        switch (e->op) {
        case OP_ADD:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] + bd[k];
            break;
        case OP_SUB:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] - bd[k];
            break;
        case OP_MUL:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] * bd[k];
            break;
        case OP_DIV:
            for (size_t k = 0; k < m; k++)
                o[k] = ad[k] / bd[k];
            break;
        default:
            for (size_t k = 0; k < m; k++)
                o[k] = darith(e->op, ad[k], bd[k]);
            break;
        }
    }
    v->d = o;
}

/* The value at e's path in one row's JSON text, parsed with jansson (borrowed from *root, which
 * the caller json_decref's); NULL when the text is not JSON or lacks the path. */
static json_t *jwalk(const node *e, const char *text, json_t **root)
{
    *root = NULL;
    if (!text || !*text)
        return NULL;
    json_error_t err;
    json_t *j = json_loads(text, JSON_DECODE_ANY, &err);
    *root = j;
    for (size_t k = 0; j && k < e->n_jpath; k++) {
        const jstep *st = &e->jpath[k];
        if (st->key)
            j = json_is_object(j) ? json_object_get(j, st->key) : NULL;
        else
            j = json_is_array(j) && st->idx < (int64_t)json_array_size(j)
                    ? json_array_get(j, (size_t)st->idx)
                    : NULL;
    }
    return j;
}

/* Whether JSON value j equals literal c (K_CONST) by JSON type and value. */
static bool jlit_eq(const json_t *j, const node *c)
{
    switch (c->type) {
    case T_INTV:
        if (json_is_integer(j))
            return (int64_t)json_integer_value(j) == c->c.i;
        return json_is_real(j) && cmp_f64_i64(json_real_value(j), c->c.i) == 0;
    case T_DBLV:
        return json_is_number(j) && json_number_value(j) == c->c.d;
    case T_STRV:
        return json_is_string(j) && json_string_length(j) == c->c.len &&
               memcmp(json_string_value(j), c->c.s, c->c.len) == 0;
    case T_BOOLV:
        return json_is_boolean(j) && json_is_true(j) == c->c.b;
    default:
        return false;
    }
}

/* K_JCONT on one row's array j (NULL or not an array: false). */
static bool jcont_row(const node *e, const json_t *j)
{
    if (e->op == JF_EXISTS)
        return j != NULL;
    if (!json_is_array(j))
        return false;
    size_t n = json_array_size(j);
    for (size_t k = 0; k < e->n_kids; k++) {
        bool found = false;
        for (size_t i = 0; i < n && !found; i++)
            found = jlit_eq(json_array_get(j, i), e->kids[k]);
        if (found && e->op != JF_ALL)
            return true;
        if (!found && e->op == JF_ALL)
            return false;
    }
    return e->op == JF_ALL;
}

/* K_JSON as a value: DOUBLE or VARCHAR per e->type, rows without such a value invalid. */
static void eval_json(const ectx *x, const node *e, reg *g, size_t row0, size_t m, vres *v)
{
    const char *const *src = x->cols[e->field].str + row0;
    size_t nw = nwords(m);
    memset(g->u, 0, nw * sizeof *g->u);
    const char **sv = NULL;
    if (e->type == T_STRV) {
        sv = aalloc(x->jarena, m * sizeof *sv);
        if (!sv) {
            static const char *const none[CHUNK]; /* every row invalid: "" */
            *x->jfail = true;
            fill_words(g->u, m, true);
            v->s = none;
            v->inv = g->u;
            return;
        }
    }
    for (size_t k = 0; k < m; k++) {
        json_t *root;
        json_t *j = jwalk(e, src[k], &root);
        bool ok = false;
        if (e->type == T_STRV) {
            sv[k] = "";
            if (json_is_string(j)) {
                size_t len = json_string_length(j);
                char *c = aalloc(x->jarena, len + 1);
                if (c) {
                    memcpy(c, json_string_value(j), len + 1);
                    sv[k] = c;
                    ok = true;
                } else {
                    *x->jfail = true;
                }
            }
        } else {
            g->dv[k] = 0;
            if (json_is_number(j)) {
                g->dv[k] = json_number_value(j);
                ok = true;
            }
        }
        if (!ok)
            g->u[k / 64] |= (uint64_t)1 << (k % 64);
        json_decref(root);
    }
    if (e->type == T_STRV)
        v->s = sv;
    else
        v->d = g->dv;
    v->inv = g->u;
}

static void eval_val(const ectx *x, const node *e, size_t r, size_t row0, size_t m, vres *v)
{
    memset(v, 0, sizeof *v);
    reg *g = &x->regs[r];
    switch (e->kind) {
    case K_CONST:
        v->scalar = true;
        v->si = e->c.i;
        v->sd = e->c.d;
        return;
    case K_FIELD: {
        const sx__colref *c = &x->cols[e->field];
        if (e->type == T_INTV)
            v->i = c->i64 + row0;
        else if (e->type == T_DBLV)
            v->d = c->f64 + row0;
        else
            v->s = c->str + row0;
        if (load_nulls(x, e->field, row0, m, g->u))
            v->inv = g->u;
        return;
    }
    case K_JSON:
        eval_json(x, e, g, row0, m, v);
        return;
    case K_ALEN: {
        const char *const *src = x->cols[e->a->field].str + row0;
        memset(g->u, 0, nwords(m) * sizeof *g->u);
        for (size_t k = 0; k < m; k++) {
            json_t *root;
            json_t *j = jwalk(e->a, src[k], &root);
            g->iv[k] = json_is_array(j) ? (int64_t)json_array_size(j) : 0;
            if (!json_is_array(j))
                g->u[k / 64] |= (uint64_t)1 << (k % 64);
            json_decref(root);
        }
        v->i = g->iv;
        v->inv = g->u;
        return;
    }
    case K_NEG: {
        vres a;
        eval_val(x, e->a, r, row0, m, &a);
        vec_num(&a, e->type, e->type == T_DBLV, g, m);
        if (e->type == T_INTV) {
            for (size_t k = 0; k < m; k++)
                g->iv[k] = wneg(a.i[k]);
            v->i = g->iv;
        } else {
            for (size_t k = 0; k < m; k++)
                g->dv[k] = -a.d[k];
            v->d = g->dv;
        }
        v->inv = a.inv;
        return;
    }
    default: { /* K_ARITH */
        vres a, b;
        reg *h = &x->regs[r + 1];
        bool dbl = e->type == T_DBLV;
        eval_val(x, e->a, r, row0, m, &a);
        eval_val(x, e->b, r + 1, row0, m, &b);
        vec_num(&a, e->a->type, dbl, g, m);
        if (!b.scalar)
            vec_num(&b, e->b->type, dbl, h, m);
        v->inv = or_inv(g, a.inv, b.inv, m);
        if (dbl)
            eval_arith_dbl(e, &a, &b, g, m, v);
        else
            eval_arith_int(e, &a, &b, g, m, v);
        return;
    }
    }
}

static bool eval_cmpc(const ectx *x, const node *e, size_t r, size_t row0, size_t m)
{
    reg *g = &x->regs[r];
    uint64_t *t = g->t;
    vres v;
    eval_val(x, e->a, r, row0, m, &v);
    if (e->op == OP_TRUE || e->op == OP_FALSE) {
        fill_words(t, m, e->op == OP_TRUE);
        return apply_inv(g, v.inv, m);
    }
    switch (e->mode) {
    case CM_INT: {
        const int64_t *a = v.i, c = e->c.i;
        CMP6(t, m, e->op, a[i], c);
        break;
    }
    case CM_DBL: {
        const double *a = v.d, c = e->c.d;
        CMP6(t, m, e->op, a[i], c);
        break;
    }
    case CM_DBL_INT: {
        const double *a = v.d;
        int64_t c = e->c.i;
        int op = e->op;
        BITS_LOOP(t, m, op_holds(op, cmp_f64_i64(a[i], c)));
        break;
    }
    default: {
        const char *const *s = v.s;
        const char *ls = e->c.s;
        size_t len = e->c.len;
        bool has_nul = e->c.has_nul;
        int op = e->op;
        if (op == OP_EQ && !has_nul)
            BITS_LOOP(t, m, strcmp(S(s[i]), ls) == 0);
        else if (op == OP_NE && !has_nul)
            BITS_LOOP(t, m, strcmp(S(s[i]), ls) != 0);
        else
            BITS_LOOP(t, m, op_holds(op, cmp_str_lit(S(s[i]), ls, len, has_nul)));
        break;
    }
    }
    return apply_inv(g, v.inv, m);
}

static bool eval_cmp(const ectx *x, const node *e, size_t r, size_t row0, size_t m)
{
    reg *g = &x->regs[r], *h = &x->regs[r + 1];
    uint64_t *t = g->t;
    size_t nw = nwords(m);
    int op = e->op;
    if (e->a->type == T_BOOLV) {
        bool ua = eval_bool(x, e->a, r, row0, m);
        bool ub = eval_bool(x, e->b, r + 1, row0, m);
        uint64_t lm = lastmask(m);
        for (size_t w = 0; w < nw; w++) {
            uint64_t eq = ~(t[w] ^ h->t[w]);
            t[w] = (op == OP_EQ ? eq : ~eq) & (w + 1 == nw ? lm : ~(uint64_t)0);
        }
        return apply_inv(g, or_inv(g, ua ? g->u : NULL, ub ? h->u : NULL, m), m);
    }
    vres a, b;
    eval_val(x, e->a, r, row0, m, &a);
    eval_val(x, e->b, r + 1, row0, m, &b);
    if (e->a->type == T_STRV) {
        /* both are VARCHAR columns: a constant operand would have made this a K_CMPC */
        const char *const *sa = a.s, *const *sb = b.s;
        if (sa && sb)
            BITS_LOOP(t, m, op_holds(op, sgn(strcmp(S(sa[i]), S(sb[i])))));
        else
            fill_words(t, m, false);
    } else {
        vec_num(&a, e->a->type, false, g, m);
        vec_num(&b, e->b->type, false, h, m);
        if (e->a->type == T_INTV && e->b->type == T_INTV) {
            const int64_t *ai = a.i, *bi = b.i;
            CMP6(t, m, op, ai[i], bi[i]);
        } else if (e->a->type == T_DBLV && e->b->type == T_DBLV) {
            const double *ad = a.d, *bd = b.d;
            CMP6(t, m, op, ad[i], bd[i]);
        } else if (e->a->type == T_INTV) {
            const int64_t *ai = a.i;
            const double *bd = b.d;
            BITS_LOOP(t, m, op_holds(op, cmp_i64_f64(ai[i], bd[i])));
        } else {
            const double *ad = a.d;
            const int64_t *bi = b.i;
            BITS_LOOP(t, m, op_holds(op, cmp_f64_i64(ad[i], bi[i])));
        }
    }
    return apply_inv(g, or_inv(g, a.inv, b.inv, m), m);
}

static bool eval_in(const ectx *x, const node *e, size_t r, size_t row0, size_t m)
{
    reg *g = &x->regs[r];
    uint64_t *t = g->t;
    size_t nw = nwords(m), n = e->n_set;
    uint64_t lm = lastmask(m);
    const uint64_t *inv = NULL;
    if (e->a->type == T_BOOLV) {
        bool hu = eval_bool(x, e->a, r, row0, m);
        for (size_t w = 0; w < nw; w++) {
            uint64_t mw = w + 1 == nw ? lm : ~(uint64_t)0;
            uint64_t tv = t[w], fv = ~(tv | (hu ? g->u[w] : 0)) & mw;
            t[w] = (e->set_t ? tv : 0) | (e->set_f ? fv : 0);
        }
        inv = hu ? g->u : NULL;
    } else {
        vres v;
        eval_val(x, e->a, r, row0, m, &v);
        inv = v.inv;
        if (e->a->type == T_INTV && e->set_bm) {
            const int64_t *a = v.i;
            const uint64_t *bm = e->set_bm, lo = (uint64_t)e->set_i[0], span = e->bm_span;
            BITS_LOOP(t, m, (uint64_t)a[i] - lo <= span && sx__bits_test(bm, (uint64_t)a[i] - lo));
        } else if (e->a->type == T_INTV) {
            const int64_t *a = v.i, *set = e->set_i;
            BITS_LOOP(t, m, in_i64(set, n, a[i]));
        } else if (e->a->type == T_DBLV) {
            const double *a = v.d, *set = e->set_d;
            BITS_LOOP(t, m, in_dbl(set, n, a[i]));
        } else {
            const char *const *s = v.s;
            const char *const *set = e->set_s;
            BITS_LOOP(t, m, in_str(set, n, S(s[i])));
        }
    }
    if (e->op) {
        for (size_t w = 0; w < nw; w++)
            t[w] = ~t[w] & (w + 1 == nw ? lm : ~(uint64_t)0);
    }
    return apply_inv(g, inv, m);
}

static bool eval_logic(const ectx *x, const node *e, size_t r, size_t row0, size_t m)
{
    reg *g = &x->regs[r], *h = &x->regs[r + 1];
    size_t nw = nwords(m);
    uint64_t lm = lastmask(m);
    bool is_and = e->kind == K_AND;
    bool hu = eval_bool(x, e->kids[0], r, row0, m);
    for (size_t k = 1; k < e->n_kids; k++) {
        /* stop once every row is decided: FALSE for and, TRUE for or (Kleene) */
        uint64_t acc = is_and ? 0 : ~(uint64_t)0;
        for (size_t w = 0; w < nw; w++) {
            uint64_t mw = w + 1 == nw ? lm : ~(uint64_t)0;
            if (is_and)
                acc |= g->t[w] | (hu ? g->u[w] : 0);
            else
                acc &= g->t[w] | ~mw;
        }
        if (is_and ? acc == 0 : acc == ~(uint64_t)0)
            break;
        bool hv = eval_bool(x, e->kids[k], r + 1, row0, m);
        if (!hu && !hv) {
            for (size_t w = 0; w < nw; w++)
                g->t[w] = is_and ? g->t[w] & h->t[w] : g->t[w] | h->t[w];
            continue;
        }
        for (size_t w = 0; w < nw; w++) {
            uint64_t mw = w + 1 == nw ? lm : ~(uint64_t)0;
            uint64_t ta = g->t[w], ua = hu ? g->u[w] : 0, tb = h->t[w], ub = hv ? h->u[w] : 0;
            uint64_t fa = ~(ta | ua) & mw, fb = ~(tb | ub) & mw, tt, ff;
            if (is_and) {
                tt = ta & tb;
                ff = fa | fb;
            } else {
                tt = ta | tb;
                ff = fa & fb;
            }
            g->t[w] = tt;
            g->u[w] = ~(tt | ff) & mw;
        }
        hu = true;
    }
    return hu;
}

/* Evaluates predicate e on rows [row0, row0+m) into x->regs[r].t (and .u); returns whether any
 * row may be UNKNOWN (then .u is written). */
static bool eval_bool(const ectx *x, const node *e, size_t r, size_t row0, size_t m)
{
    reg *g = &x->regs[r];
    switch (e->kind) {
    case K_CONST:
        fill_words(g->t, m, e->c.b);
        return false;
    case K_FIELD: {
        const bool *b = x->cols[e->field].b + row0;
        BITS_LOOP(g->t, m, b[i]);
        return apply_inv(g, load_nulls(x, e->field, row0, m, g->u) ? g->u : NULL, m);
    }
    case K_ISNULL: {
        size_t nw = nwords(m);
        if (!load_nulls(x, e->field, row0, m, g->t))
            memset(g->t, 0, nw * sizeof *g->t);
        if (e->op)
            for (size_t w = 0; w < nw; w++)
                g->t[w] = ~g->t[w] & (w + 1 == nw ? lastmask(m) : ~(uint64_t)0);
        return false;
    }
    case K_NOT: {
        bool hu = eval_bool(x, e->a, r, row0, m);
        size_t nw = nwords(m);
        for (size_t w = 0; w < nw; w++)
            g->t[w] = ~(g->t[w] | (hu ? g->u[w] : 0));
        g->t[nw - 1] &= lastmask(m);
        return hu;
    }
    case K_AND:
    case K_OR:
        return eval_logic(x, e, r, row0, m);
    case K_CMPC:
        return eval_cmpc(x, e, r, row0, m);
    case K_CMP:
        return eval_cmp(x, e, r, row0, m);
    case K_IN:
        return eval_in(x, e, r, row0, m);
    case K_JSON: { /* a boolean at a JSON path: TRUE / FALSE, UNKNOWN when not a boolean */
        const char *const *src = x->cols[e->field].str + row0;
        size_t nw = nwords(m);
        memset(g->t, 0, nw * sizeof *g->t);
        memset(g->u, 0, nw * sizeof *g->u);
        for (size_t k = 0; k < m; k++) {
            json_t *root;
            json_t *j = jwalk(e, src[k], &root);
            if (json_is_true(j))
                g->t[k / 64] |= (uint64_t)1 << (k % 64);
            else if (!json_is_false(j))
                g->u[k / 64] |= (uint64_t)1 << (k % 64);
            json_decref(root);
        }
        return true;
    }
    case K_JCONT: {
        const char *const *src = x->cols[e->a->field].str + row0;
        memset(g->t, 0, nwords(m) * sizeof *g->t);
        for (size_t k = 0; k < m; k++) {
            json_t *root;
            json_t *j = jwalk(e->a, src[k], &root);
            if (jcont_row(e, j))
                g->t[k / 64] |= (uint64_t)1 << (k % 64);
            json_decref(root);
        }
        /* a NULL row (its text is "") is FALSE for the JSON walk: UNKNOWN for the contains
         * functions, as a comparison with NULL; `exists` stays FALSE there */
        if (e->op != JF_EXISTS && load_nulls(x, e->a->field, row0, m, g->u))
            return apply_inv(g, g->u, m);
        return false;
    }
    default: { /* K_LIKE */
        vres v;
        eval_val(x, e->a, r, row0, m, &v);
        const char *const *s = v.s;
        switch (e->mode) {
        case LK_NONE:
        case LK_ALL:
            fill_words(g->t, m, e->mode == LK_ALL);
            break;
        case LK_EXACT: {
            const char *ls = e->c.s;
            BITS_LOOP(g->t, m, strcmp(S(s[i]), ls) == 0);
            break;
        }
        case LK_PREFIX: {
            const char *ls = e->c.s;
            size_t len = e->c.len;
            BITS_LOOP(g->t, m, S(s[i])[0] == ls[0] && strncmp(S(s[i]), ls, len) == 0);
            break;
        }
        case LK_INFIX: {
            const char *ls = e->c.s;
            if (e->c.len == 1)
                BITS_LOOP(g->t, m, strchr(S(s[i]), ls[0]) != NULL);
            else
                BITS_LOOP(g->t, m, strstr(S(s[i]), ls) != NULL);
            break;
        }
        default: {
            uint64_t *sc = x->like_sc;
            BITS_LOOP(g->t, m, like_match(e, S(s[i]), sc));
            break;
        }
        }
        return apply_inv(g, v.inv, m);
    }
    }
}

sx_status sx__expr_eval(const sx__expr *e, const sx__colref *cols, size_t n, uint64_t *out)
{
    if (n == 0)
        return SX_OK;
    const node *root = e->root;
    if (root->kind == K_CONST) {
        for (size_t row0 = 0; row0 < n; row0 += CHUNK) {
            size_t m = n - row0 < CHUNK ? n - row0 : CHUNK;
            fill_words(out + row0 / 64, m, root->c.b);
        }
        return SX_OK;
    }
    for (size_t k = 0; k < e->n_used; k++) {
        const sx__colref *c = &cols[e->used[k]];
        sx_field_type ty = e->used_types[k];
        bool ok = c->type == ty &&
                  ((ty == SX_FIELD_INT64 && c->i64) || (ty == SX_FIELD_DOUBLE && c->f64) ||
                   (ty == SX_FIELD_BOOL && c->b) || (ty == SX_FIELD_VARCHAR && c->str));
        if (!ok)
            return sx__err(SX_EINVAL, "filter: column %zu missing or of the wrong type",
                           e->used[k]);
    }
    size_t n_regs = (size_t)root->regs + 1;
    size_t reg_bytes = CHUNK * sizeof(int64_t) + (size_t)2 * CW * sizeof(uint64_t);
    size_t like_bytes = e->like_words * sizeof(uint64_t);
    char *scratch = sx__malloc(n_regs * (reg_bytes + sizeof(reg)) + like_bytes);
    if (!scratch)
        return sx__err(SX_ENOMEM, "out of memory evaluating a filter");
    reg *regs = (void *)(scratch + n_regs * reg_bytes);
    for (size_t k = 0; k < n_regs; k++) {
        char *base = scratch + k * reg_bytes;
        regs[k].iv = (void *)base;
        regs[k].dv = (void *)base;
        regs[k].t = (void *)(base + CHUNK * sizeof(int64_t));
        regs[k].u = regs[k].t + CW;
    }
    ablock *jarena = NULL;
    bool jfail = false;
    ectx x = { .cols = cols,
               .regs = regs,
               .like_sc =
                   e->like_words ? (void *)(scratch + n_regs * (reg_bytes + sizeof(reg))) : NULL,
               .jarena = &jarena,
               .jfail = &jfail };
    for (size_t row0 = 0; row0 < n; row0 += CHUNK) {
        size_t m = n - row0 < CHUNK ? n - row0 : CHUNK;
        /* the calling thread's deadline (util/deadline.h), once per chunk */
        sx_status st = sx__deadline_check_ambient();
        if (st != SX_OK) {
            sx__free(scratch);
            return st;
        }
        (void)eval_bool(&x, root, 0, row0, m);
        afree(jarena);
        jarena = NULL;
        if (jfail) {
            sx__free(scratch);
            return sx__err(SX_ENOMEM, "out of memory evaluating a filter on a JSON path");
        }
        /* UNKNOWN rows are already clear in t (invariant 4) */
        memcpy(out + row0 / 64, regs[0].t, nwords(m) * sizeof(uint64_t));
    }
    sx__free(scratch);
    return SX_OK;
}
