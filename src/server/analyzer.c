/*
 * analyzer.c: Milvus's text analyzers for full-text search (BM25), English only.
 *
 * An analyzer turns a text into tokens: a tokenizer, then filters, as Milvus's analyzer_params
 * describe them:
 *   {"type": "standard"}           the standard tokenizer + lowercase (Milvus's default)
 *   {"type": "english"}            standard + lowercase + English stemmer + English stop words
 *   {"type": "standard"|"english", "stop_words": [...]}   with these stop words (added)
 *   {"tokenizer": "standard"|"whitespace", "filter": [...]} custom; filters: "lowercase",
 *       "alphanumonly", "asciifolding" (refused: not built), {"type": "stop", "stop_words":
 *       ["_english_", "word", ...]}, {"type": "stemmer", "language": "english"},
 *       {"type": "length", "max": N}
 * Other types and languages (chinese, jieba, lindera, icu, ...) are refused with a message naming
 * what is served.
 *
 * Tokenizers. standard: words of letters and digits (bytes >= 0x80 count as letters, so UTF-8
 * words stay whole), with an apostrophe between two letters or a '.' / ',' between two digits
 * kept inside the word (UAX #29's MidLetter / MidNum, the cases that matter for English);
 * everything else separates. whitespace: runs of non-space bytes.
 * Lowercase folds ASCII only. The stemmer is the Snowball English ("Porter2") algorithm, written
 * from its published description (snowballstem.org); the stop list is Lucene's English set.
 *
 * A token becomes a sparse index by a 64-bit string hash cut to 32 bits (never 2^32 - 1): equal
 * tokens give equal indexes; two different tokens may collide (about 1 in 4 billion per pair),
 * which merges their counts, as Milvus's hashing does.
 *
 * Thread-safety: an sx__analyzer is immutable after sx__analyzer_new; any thread may run it.
 */
#include "server/analyzer.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "util/alloc.h"
#include "util/hash.h"

#define MAX_STOP 256
#define MAX_TOK  255 /* longer tokens are cut */

struct sx__analyzer {
    bool whitespace; /* tokenizer */
    bool lowercase, alnum_only, stem;
    uint32_t max_len; /* 0: none */
    size_t n_stop;
    char *stop[MAX_STOP];
};

static const char *const english_stop[] = {
    "a",    "an",    "and",   "are",  "as",   "at", "be",  "but",  "by",   "for",  "if",  "in",
    "into", "is",    "it",    "no",   "not",  "of", "on",  "or",   "such", "that", "the", "their",
    "then", "there", "these", "they", "this", "to", "was", "will", "with", NULL
};

void sx__analyzer_free(sx__analyzer *a)
{
    if (!a)
        return;
    for (size_t i = 0; i < a->n_stop; i++)
        sx__free(a->stop[i]);
    sx__free(a);
}

static bool add_stop(sx__analyzer *a, const char *w, char *why, size_t cap)
{
    if (strcmp(w, "_english_") == 0) {
        for (size_t i = 0; english_stop[i]; i++)
            if (!add_stop(a, english_stop[i], why, cap))
                return false;
        return true;
    }
    if (a->n_stop == MAX_STOP) {
        (void)snprintf(why, cap, "more than %d stop words", MAX_STOP);
        return false;
    }
    a->stop[a->n_stop] = sx__strdup(w);
    if (!a->stop[a->n_stop]) {
        (void)snprintf(why, cap, "out of memory");
        return false;
    }
    a->n_stop++;
    return true;
}

static bool stop_words(sx__analyzer *a, const json_t *list, char *why, size_t cap)
{
    if (!json_is_array(list)) {
        (void)snprintf(why, cap, "stop_words must be an array of strings");
        return false;
    }
    size_t i;
    const json_t *w;
    json_array_foreach(list, i, w) {
        if (!json_is_string(w)) {
            (void)snprintf(why, cap, "stop_words must be an array of strings");
            return false;
        }
        if (!add_stop(a, json_string_value(w), why, cap))
            return false;
    }
    return true;
}

static bool add_filter(sx__analyzer *a, const json_t *fo, char *why, size_t cap)
{
    const char *t =
        json_is_string(fo) ? json_string_value(fo) : json_string_value(json_object_get(fo, "type"));
    if (!t) {
        (void)snprintf(why, cap, "a filter is a name or an object with a \"type\"");
        return false;
    }
    if (strcmp(t, "lowercase") == 0) {
        a->lowercase = true;
    } else if (strcmp(t, "alphanumonly") == 0) {
        a->alnum_only = true;
    } else if (strcmp(t, "stop") == 0) {
        const json_t *sw = json_object_get(fo, "stop_words");
        return sw ? stop_words(a, sw, why, cap) : add_stop(a, "_english_", why, cap);
    } else if (strcmp(t, "stemmer") == 0) {
        const char *lang = json_string_value(json_object_get(fo, "language"));
        if (!lang || strcmp(lang, "english") != 0) {
            (void)snprintf(why, cap,
                           "stemmer language %s is not supported by Sextant (english only)",
                           lang ? lang : "(none)");
            return false;
        }
        a->stem = true;
    } else if (strcmp(t, "length") == 0) {
        const json_t *mx = json_object_get(fo, "max");
        if (!json_is_integer(mx) || json_integer_value(mx) < 1) {
            (void)snprintf(why, cap, "the length filter needs \"max\", a positive integer");
            return false;
        }
        a->max_len = (uint32_t)json_integer_value(mx);
    } else {
        (void)snprintf(why, cap,
                       "filter %s is not supported by Sextant (lowercase, alphanumonly, stop, "
                       "stemmer, length)",
                       t);
        return false;
    }
    return true;
}

sx__analyzer *sx__analyzer_new(const json_t *params, char *why, size_t cap)
{
    sx__analyzer *a = sx__calloc(1, sizeof *a);
    if (!a) {
        (void)snprintf(why, cap, "out of memory");
        return NULL;
    }
    bool ok = true;
    const char *type = json_string_value(json_object_get(params, "type"));
    const json_t *tok = json_object_get(params, "tokenizer");
    if (params && !json_is_object(params)) {
        (void)snprintf(why, cap, "analyzer_params must be an object");
        ok = false;
    } else if (!tok) { /* a built-in type (standard by default) */
        if (!type || strcmp(type, "standard") == 0) {
            a->lowercase = true;
        } else if (strcmp(type, "english") == 0) {
            a->lowercase = a->stem = true;
            ok = add_stop(a, "_english_", why, cap);
        } else {
            (void)snprintf(
                why, cap, "analyzer type %s is not supported by Sextant (standard, english)", type);
            ok = false;
        }
        const json_t *sw = json_object_get(params, "stop_words");
        if (ok && sw)
            ok = stop_words(a, sw, why, cap);
    } else {
        const char *tn = json_is_string(tok) ? json_string_value(tok)
                                             : json_string_value(json_object_get(tok, "type"));
        if (!tn || (strcmp(tn, "standard") != 0 && strcmp(tn, "whitespace") != 0)) {
            (void)snprintf(why, cap,
                           "tokenizer %s is not supported by Sextant (standard, whitespace)",
                           tn ? tn : "(none)");
            ok = false;
        }
        a->whitespace = tn && strcmp(tn, "whitespace") == 0;
        const json_t *fl = json_object_get(params, "filter");
        if (ok && fl && !json_is_array(fl)) {
            (void)snprintf(why, cap, "filter must be an array");
            ok = false;
        }
        size_t i;
        const json_t *fo;
        json_array_foreach(fl, i, fo) {
            if (!ok)
                break;
            ok = add_filter(a, fo, why, cap);
        }
    }
    if (!ok) {
        sx__analyzer_free(a);
        return NULL;
    }
    return a;
}

/* ---------------------------------------------------------------- Porter2 (Snowball English) */

static bool is_v(char c)
{
    return c == 'a' || c == 'e' || c == 'i' || c == 'o' || c == 'u' || c == 'y';
}

static bool ends(const char *w, size_t n, const char *s)
{
    size_t k = strlen(s);
    return n >= k && memcmp(w + n - k, s, k) == 0;
}

/* The start of the region after the first non-vowel following a vowel, from `from`. */
static size_t region(const char *w, size_t n, size_t from)
{
    for (size_t i = from + 1; i < n; i++)
        if (!is_v(w[i]) && is_v(w[i - 1]))
            return i + 1;
    return n;
}

/* A short syllable ending at i (the syllable's last letter). */
static bool short_syll(const char *w, size_t i)
{
    if (i == 1)
        return is_v(w[0]) && !is_v(w[1]);
    if (i < 2)
        return false;
    char c = w[i];
    return !is_v(w[i - 2]) && is_v(w[i - 1]) && !is_v(c) && c != 'w' && c != 'x' && c != 'Y';
}

static bool is_short(const char *w, size_t n, size_t r1)
{
    return r1 >= n && n > 0 && short_syll(w, n - 1);
}

static bool has_vowel(const char *w, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (is_v(w[i]))
            return true;
    return false;
}

static bool is_double(const char *w, size_t n)
{
    static const char *const d[] = { "bb", "dd", "ff", "gg", "mm", "nn", "pp", "rr", "tt" };
    for (size_t i = 0; i < 9; i++)
        if (ends(w, n, d[i]))
            return true;
    return false;
}

static bool li_ending(char c)
{
    return strchr("cdeghkmnrt", c) != NULL && c;
}

/* Replaces the suffix of length k with r. */
static void repl(char *w, size_t *n, size_t k, const char *r)
{
    *n -= k;
    size_t rl = strlen(r);
    memcpy(w + *n, r, rl);
    *n += rl;
    w[*n] = '\0';
}

/* The longest of suffixes (NULL-terminated, any order) w ends with: its index, -1 none. */
static int longest(const char *w, size_t n, const char *const *sfx)
{
    int best = -1;
    size_t bl = 0;
    for (int i = 0; sfx[i]; i++) {
        size_t k = strlen(sfx[i]);
        if (k > bl && ends(w, n, sfx[i])) {
            best = i;
            bl = k;
        }
    }
    return best;
}

static bool exception1(char *w, size_t *n)
{
    static const char *const from[] = { "skis",   "skies",  "dying", "lying", "tying",
                                        "idly",   "gently", "ugly",  "early", "only",
                                        "singly", "sky",    "news",  "howe",  "atlas",
                                        "cosmos", "bias",   "andes", NULL };
    static const char *const to[] = { "ski",   "sky",  "die",   "lie",    "tie",   "idl",
                                      "gentl", "ugli", "earli", "onli",   "singl", "sky",
                                      "news",  "howe", "atlas", "cosmos", "bias",  "andes" };
    for (int i = 0; from[i]; i++)
        if (strcmp(w, from[i]) == 0) {
            *n = strlen(to[i]); /* never longer than its "from" */
            memcpy(w, to[i], *n + 1);
            return true;
        }
    return false;
}

static void step2(char *w, size_t *n, size_t r1)
{
    static const char *const s[] = { "tional",  "enci",    "anci",    "abli",    "entli",
                                     "izer",    "ization", "ational", "ation",   "ator",
                                     "alism",   "aliti",   "alli",    "fulness", "ousli",
                                     "ousness", "iveness", "iviti",   "biliti",  "bli",
                                     "ogi",     "fulli",   "lessli",  "li",      NULL };
    static const char *const r[] = { "tion", "ence", "ance", "able", "ent", "ize", "ize",  "ate",
                                     "ate",  "ate",  "al",   "al",   "al",  "ful", "ous",  "ous",
                                     "ive",  "ive",  "ble",  "ble",  "og",  "ful", "less", "" };
    int i = longest(w, *n, s);
    if (i < 0)
        return;
    size_t k = strlen(s[i]);
    if (*n - k < r1)
        return;
    if (strcmp(s[i], "ogi") == 0 && !(*n - k > 0 && w[*n - k - 1] == 'l'))
        return;
    if (strcmp(s[i], "li") == 0 && !(*n - k > 0 && li_ending(w[*n - k - 1])))
        return;
    repl(w, n, k, r[i]);
}

static void step3(char *w, size_t *n, size_t r1, size_t r2)
{
    static const char *const s[] = { "tional", "ational", "alize", "icate", "iciti",
                                     "ical",   "ful",     "ness",  "ative", NULL };
    static const char *const r[] = { "tion", "ate", "al", "ic", "ic", "ic", "", "", "" };
    int i = longest(w, *n, s);
    if (i < 0)
        return;
    size_t k = strlen(s[i]);
    if (*n - k < r1 || (strcmp(s[i], "ative") == 0 && *n - k < r2))
        return;
    repl(w, n, k, r[i]);
}

static void step4(char *w, size_t *n, size_t r2)
{
    static const char *const s[] = { "al",  "ance",  "ence", "er",  "ic",  "able", "ible",
                                     "ant", "ement", "ment", "ent", "ism", "ate",  "iti",
                                     "ous", "ive",   "ize",  "ion", NULL };
    int i = longest(w, *n, s);
    if (i < 0)
        return;
    size_t k = strlen(s[i]);
    if (*n - k < r2)
        return;
    if (strcmp(s[i], "ion") == 0 && !(*n - k > 0 && (w[*n - k - 1] == 's' || w[*n - k - 1] == 't')))
        return;
    repl(w, n, k, "");
}

/* w: a lowercase ASCII word of n letters (buffer of MAX_TOK + 2); stemmed in place. */
static void stem(char *w, size_t *n)
{
    if (*n <= 2 || exception1(w, n))
        return;
    if (w[0] == '\'') { /* the NUL moves too */
        memmove(w, w + 1, *n);
        (*n)--;
    }
    for (size_t i = 0; i < *n; i++) /* y as a consonant */
        if (w[i] == 'y' && (i == 0 || is_v(w[i - 1])))
            w[i] = 'Y';
    size_t r1 = (*n >= 5 && (strncmp(w, "gener", 5) == 0 || strncmp(w, "arsen", 5) == 0)) ? 5
                : (*n >= 6 && strncmp(w, "commun", 6) == 0)                               ? 6
                                                            : region(w, *n, 0);
    size_t r2 = region(w, *n, r1);
    /* step 0 */
    static const char *const s0[] = { "'s'", "'s", "'", NULL };
    int i0 = longest(w, *n, s0);
    if (i0 >= 0)
        repl(w, n, strlen(s0[i0]), "");
    /* step 1a */
    if (ends(w, *n, "sses")) {
        repl(w, n, 4, "ss");
    } else if (ends(w, *n, "ied") || ends(w, *n, "ies")) {
        repl(w, n, 3, *n > 4 ? "i" : "ie");
    } else if (ends(w, *n, "us") || ends(w, *n, "ss")) {
        /* unchanged */
    } else if (ends(w, *n, "s") && *n >= 2 && has_vowel(w, *n - 2)) {
        repl(w, n, 1, "");
    }
    static const char *const exc2[] = { "inning",  "outing", "canning", "herring", "earring",
                                        "proceed", "exceed", "succeed", NULL };
    for (int i = 0; exc2[i]; i++)
        if (strcmp(w, exc2[i]) == 0)
            goto done;
    /* step 1b */
    static const char *const s1b[] = { "eed", "eedly", "ed", "edly", "ing", "ingly", NULL };
    int ib = longest(w, *n, s1b);
    if (ib == 0 || ib == 1) {
        size_t k = strlen(s1b[ib]);
        if (*n - k >= r1)
            repl(w, n, k, "ee");
    } else if (ib >= 2) {
        size_t k = strlen(s1b[ib]);
        if (has_vowel(w, *n - k)) {
            repl(w, n, k, "");
            bool add_e = ends(w, *n, "at") || ends(w, *n, "bl") || ends(w, *n, "iz");
            if (!add_e && is_double(w, *n))
                repl(w, n, 1, "");
            else if (add_e || is_short(w, *n, r1))
                repl(w, n, 0, "e");
        }
    }
    /* step 1c */
    if (*n > 2 && (w[*n - 1] == 'y' || w[*n - 1] == 'Y') && !is_v(w[*n - 2]))
        w[*n - 1] = 'i';
    step2(w, n, r1);
    step3(w, n, r1, r2);
    step4(w, n, r2);
    /* step 5 */
    if (*n > 0 && w[*n - 1] == 'e') {
        if (*n - 1 >= r2 || (*n - 1 >= r1 && !short_syll(w, *n - 2)))
            repl(w, n, 1, "");
    } else if (*n > 1 && w[*n - 1] == 'l' && *n - 1 >= r2 && w[*n - 2] == 'l') {
        repl(w, n, 1, "");
    }
done:
    for (size_t i = 0; i < *n; i++)
        if (w[i] == 'Y')
            w[i] = 'y';
}

void sx__stem_english(char *w, size_t *n)
{
    stem(w, n);
}

/* ---------------------------------------------------------------- running */

static bool is_word_byte(unsigned char c)
{
    return isalnum(c) || c >= 0x80;
}

typedef struct tf_acc {
    uint32_t *ids;
    size_t n, cap;
    bool oom;
} tf_acc;

static void tf_emit(void *ctx, const char *tok, size_t n)
{
    tf_acc *t = ctx;
    if (t->oom)
        return;
    if (t->n == t->cap) {
        size_t nc = t->cap ? 2 * t->cap : 64;
        uint32_t *p = sx__realloc(t->ids, nc * sizeof *p);
        if (!p) {
            t->oom = true;
            return;
        }
        t->ids = p;
        t->cap = nc;
    }
    t->ids[t->n++] = sx__token_index(tok, n);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

bool sx__analyze_tf(const sx__analyzer *a, const char *text, uint32_t **idx, float **val, size_t *n)
{
    tf_acc t = { NULL, 0, 0, false };
    (void)sx__analyze(a, text ? text : "", tf_emit, &t);
    uint32_t *oi = sx__malloc((t.n ? t.n : 1) * sizeof *oi);
    float *ov = sx__malloc((t.n ? t.n : 1) * sizeof *ov);
    if (t.oom || !oi || !ov) {
        sx__free(t.ids);
        sx__free(oi);
        sx__free(ov);
        return false;
    }
    if (t.n)
        qsort(t.ids, t.n, sizeof *t.ids, cmp_u32);
    size_t k = 0;
    for (size_t i = 0; i < t.n; i++) {
        if (k && oi[k - 1] == t.ids[i]) {
            ov[k - 1] += 1;
        } else {
            oi[k] = t.ids[i];
            ov[k++] = 1;
        }
    }
    sx__free(t.ids);
    *idx = oi;
    *val = ov;
    *n = k;
    return true;
}

uint32_t sx__token_index(const char *tok, size_t n)
{
    char buf[MAX_TOK + 1];
    size_t k = n > MAX_TOK ? MAX_TOK : n;
    memcpy(buf, tok, k);
    buf[k] = '\0';
    uint32_t h = (uint32_t)sx__hash_str(buf);
    return h == UINT32_MAX ? UINT32_MAX - 1 : h;
}

size_t sx__analyze(const sx__analyzer *a,
                   const char *text,
                   void (*emit)(void *ctx, const char *tok, size_t n),
                   void *ctx)
{
    size_t count = 0;
    const unsigned char *p = (const unsigned char *)text;
    while (*p) {
        const unsigned char *s;
        if (a->whitespace) {
            while (*p && isspace(*p))
                p++;
            s = p;
            while (*p && !isspace(*p))
                p++;
        } else {
            while (*p && !is_word_byte(*p))
                p++;
            s = p;
            while (*p) {
                /* a word byte, or an apostrophe between letters (MidLetter), or '.' / ','
                 * between digits (MidNum) */
                bool mid_letter = *p == '\'' && p > s && isalpha(p[-1]) && isalpha(p[1]);
                bool mid_num = (*p == '.' || *p == ',') && p > s && isdigit(p[-1]) && isdigit(p[1]);
                if (!is_word_byte(*p) && !mid_letter && !mid_num)
                    break;
                p++;
            }
        }
        size_t n = (size_t)(p - s);
        if (n == 0)
            continue;
        char w[MAX_TOK + 2];
        if (n > MAX_TOK)
            n = MAX_TOK;
        memcpy(w, s, n);
        w[n] = '\0';
        if (a->lowercase)
            for (size_t i = 0; i < n; i++)
                w[i] = (char)tolower((unsigned char)w[i]);
        if (a->alnum_only) {
            bool ok = true;
            for (size_t i = 0; ok && i < n; i++)
                ok = isalnum((unsigned char)w[i]) != 0;
            if (!ok)
                continue;
        }
        bool stopped = false;
        for (size_t i = 0; !stopped && i < a->n_stop; i++)
            stopped = strcmp(a->stop[i], w) == 0;
        if (stopped)
            continue;
        if (a->stem) {
            bool ascii_lower = true;
            for (size_t i = 0; ascii_lower && i < n; i++)
                ascii_lower = (w[i] >= 'a' && w[i] <= 'z') || w[i] == '\'';
            if (ascii_lower)
                stem(w, &n);
        }
        if (a->max_len && n > a->max_len)
            continue;
        count++;
        if (emit)
            emit(ctx, w, n);
    }
    return count;
}
