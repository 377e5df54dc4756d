/*
 * test_analyzer.c: the full-text analyzers (src/server/analyzer.c).
 *
 *   stemmer     98 words of the Snowball English vocabulary and their published stems (the
 *               "consign..." / "knack..." runs of its sample, and the algorithm description's
 *               examples: exceptions, step 1a-5 cases, R1 prefixes).
 *   tokenizer   the standard tokenizer's words (apostrophes inside words, decimal numbers, UTF-8
 *               kept whole, punctuation splitting), whitespace tokenizer, lowercase.
 *   filters     stop words (the English set, custom lists), the english type (stem + stop),
 *               length, alphanumonly; refused types, tokenizers, filters and languages.
 *   tf          term frequencies: repeated tokens counted, indexes ascending and distinct, the
 *               same token always the same index, different ones different here.
 */
#include <string.h>

#include "harness.h"
#include "server/analyzer.h"
#include "util/alloc.h"

static void stems(void)
{
    static const char *const p[][2] = {
        { "consign", "consign" },
        { "consigned", "consign" },
        { "consigning", "consign" },
        { "consignment", "consign" },
        { "consist", "consist" },
        { "consisted", "consist" },
        { "consistency", "consist" },
        { "consistent", "consist" },
        { "consistently", "consist" },
        { "consisting", "consist" },
        { "consists", "consist" },
        { "consolation", "consol" },
        { "consolations", "consol" },
        { "consolatory", "consolatori" },
        { "console", "consol" },
        { "consoled", "consol" },
        { "consoles", "consol" },
        { "consolidate", "consolid" },
        { "consolidated", "consolid" },
        { "consolidating", "consolid" },
        { "consoling", "consol" },
        { "consolingly", "consol" },
        { "consols", "consol" },
        { "consonant", "conson" },
        { "consort", "consort" },
        { "consorted", "consort" },
        { "conspicuous", "conspicu" },
        { "conspicuously", "conspicu" },
        { "conspiracy", "conspiraci" },
        { "conspirator", "conspir" },
        { "conspirators", "conspir" },
        { "conspire", "conspir" },
        { "conspired", "conspir" },
        { "conspiring", "conspir" },
        { "constable", "constabl" },
        { "constables", "constabl" },
        { "constance", "constanc" },
        { "constancy", "constanc" },
        { "constant", "constant" },
        { "knack", "knack" },
        { "knackeries", "knackeri" },
        { "knaves", "knave" },
        { "knavish", "knavish" },
        { "kneaded", "knead" },
        { "kneading", "knead" },
        { "knee", "knee" },
        { "kneeled", "kneel" },
        { "kneeling", "kneel" },
        { "knees", "knee" },
        { "knightly", "knight" },
        { "knitted", "knit" },
        { "knitting", "knit" },
        { "knives", "knive" },
        { "knocker", "knocker" },
        { "knocking", "knock" },
        { "generously", "generous" },
        { "running", "run" },
        { "cries", "cri" },
        { "dying", "die" },
        { "happy", "happi" },
        { "caresses", "caress" },
        { "ponies", "poni" },
        { "ties", "tie" },
        { "agreed", "agre" },
        { "hopping", "hop" },
        { "relational", "relat" },
        { "conditional", "condit" },
        { "hopeful", "hope" },
        { "news", "news" },
        { "communism", "communism" },
        { "generate", "generat" },
        { "skies", "sky" },
        { "gently", "gentl" },
        { "sky", "sky" },
        { "by", "by" },
        { "say", "say" },
        { "cats", "cat" },
        { "gas", "gas" },
        { "this", "this" },
        { "kiwis", "kiwi" },
        { "feed", "feed" },
        { "plastered", "plaster" },
        { "motoring", "motor" },
        { "sing", "sing" },
        { "troubled", "troubl" },
        { "sized", "size" },
        { "falling", "fall" },
        { "hissing", "hiss" },
        { "filing", "file" },
        { "inning", "inning" },
        { "proceed", "proceed" },
        { "electrical", "electr" },
        { "formative", "format" },
        { "goodness", "good" },
        { "adjustable", "adjust" },
        { "replacement", "replac" },
        { "adoption", "adopt" },
        { "effective", "effect" },
        { "bowdlerize", "bowdler" },
        { "retrieval", "retriev" },
    };
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        char w[64];
        size_t n = strlen(p[i][0]);
        memcpy(w, p[i][0], n + 1);
        sx__stem_english(w, &n);
        w[n] = '\0';
        if (strcmp(w, p[i][1]) != 0)
            FAILF("%s stems to %s, want %s", p[i][0], w, p[i][1]);
    }
}

typedef struct toks {
    char buf[1024];
    size_t n;
} toks;

static void emit(void *ctx, const char *t, size_t n)
{
    toks *x = ctx;
    x->n +=
        (size_t)snprintf(x->buf + x->n, sizeof x->buf - x->n, "%s%.*s", x->n ? "|" : "", (int)n, t);
}

/* The tokens of text under params (JSON text, NULL: standard), joined by '|'. */
static const char *run(const char *params, const char *text)
{
    static toks t;
    memset(&t, 0, sizeof t);
    json_t *p = params ? json_loads(params, 0, NULL) : NULL;
    char why[256];
    sx__analyzer *a = sx__analyzer_new(p, why, sizeof why);
    json_decref(p);
    if (!a)
        FAILF("%s: %s", params, why);
    size_t n = sx__analyze(a, text, emit, &t);
    size_t bars = 0;
    for (size_t i = 0; i < t.n; i++)
        bars += t.buf[i] == '|';
    ASSERT_EQ(n, t.n ? bars + 1 : 0);
    sx__analyzer_free(a);
    return t.buf;
}

static void expect_toks(const char *params, const char *text, const char *want)
{
    const char *got = run(params, text);
    if (strcmp(got, want) != 0)
        FAILF("%s on \"%s\": %s, want %s", params ? params : "standard", text, got, want);
}

static void tokenizers_and_filters(void)
{
    expect_toks(NULL, "Hello, World! It's 3.14 and 1,000 dollars; e-mail me.",
                "hello|world|it's|3.14|and|1,000|dollars|e|mail|me");
    expect_toks(NULL, "café naïve", "café|naïve");
    expect_toks(NULL, "  ", "");
    expect_toks(NULL, "don't 'quoted' x.y 5.", "don't|quoted|x|y|5");
    expect_toks("{\"type\":\"english\"}", "The Running of the Bulls is RUNNING fast",
                "run|bull|run|fast");
    expect_toks("{\"type\":\"standard\",\"stop_words\":[\"of\",\"the\"]}",
                "The Running of the Bulls", "running|bulls");
    expect_toks("{\"tokenizer\":\"whitespace\"}", "A-b  C.d", "A-b|C.d");
    expect_toks("{\"tokenizer\":\"whitespace\",\"filter\":[\"lowercase\",\"alphanumonly\"]}",
                "A-b  Cd 9", "cd|9");
    expect_toks("{\"tokenizer\":\"standard\",\"filter\":[\"lowercase\",{\"type\":\"length\","
                "\"max\":4},{\"type\":\"stop\",\"stop_words\":[\"_english_\",\"bb\"]}]}",
                "a bb ccc dddd eeeee the", "ccc|dddd");
    expect_toks("{\"tokenizer\":\"standard\",\"filter\":[{\"type\":\"stemmer\","
                "\"language\":\"english\"}]}",
                "Running dogs", "Running|dog"); /* no lowercase: capitalised words unstemmed */
    static const char *const bad[] = {
        "{\"type\":\"chinese\"}",
        "{\"tokenizer\":\"jieba\"}",
        "{\"tokenizer\":\"standard\",\"filter\":[\"asciifolding\"]}",
        "{\"tokenizer\":\"standard\",\"filter\":[{\"type\":\"stemmer\",\"language\":\"french\"}]}",
        "{\"tokenizer\":\"standard\",\"filter\":[{\"type\":\"length\"}]}",
        "{\"type\":\"standard\",\"stop_words\":\"the\"}",
        "{\"tokenizer\":\"standard\",\"filter\":\"lowercase\"}",
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        json_t *p = json_loads(bad[i], 0, NULL);
        char why[256] = "";
        sx__analyzer *a = sx__analyzer_new(p, why, sizeof why);
        json_decref(p);
        if (a || !why[0])
            FAILF("%s was accepted", bad[i]);
    }
}

static void term_frequencies(void)
{
    char why[256];
    sx__analyzer *a = sx__analyzer_new(NULL, why, sizeof why);
    ASSERT(a);
    uint32_t *idx = NULL;
    float *val = NULL;
    size_t n = 0;
    ASSERT(sx__analyze_tf(a, "b a b c b a", &idx, &val, &n));
    ASSERT_EQ(n, 3);
    for (size_t i = 1; i < n; i++)
        ASSERT(idx[i] > idx[i - 1]);
    float total = 0;
    for (size_t i = 0; i < n; i++) {
        total += val[i];
        if (idx[i] == sx__token_index("b", 1))
            ASSERT(val[i] == 3.0f);
        else if (idx[i] == sx__token_index("a", 1))
            ASSERT(val[i] == 2.0f);
        else
            ASSERT(idx[i] == sx__token_index("c", 1) && val[i] == 1.0f);
    }
    ASSERT(total == 6.0f);
    ASSERT(sx__token_index("b", 1) != sx__token_index("c", 1));
    ASSERT(sx__token_index("abc", 3) == sx__token_index("abcdef", 3)); /* by length */
    sx__free(idx);
    sx__free(val);
    ASSERT(sx__analyze_tf(a, "", &idx, &val, &n));
    ASSERT_EQ(n, 0);
    sx__free(idx);
    sx__free(val);
    sx__analyzer_free(a);
}

int main(void)
{
    RUN(stems);
    RUN(tokenizers_and_filters);
    RUN(term_frequencies);
    return TEST_DONE();
}
