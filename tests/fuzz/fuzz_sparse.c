/*
 * fuzz_sparse.c: libFuzzer harness for the sparse-vector text and the full-text analyzers.
 *
 * Byte 0 % 4 picks what the rest (cut at the first NUL byte) is fed to:
 *   0  the engine's sparse-vector text (sx_sparse_parse / sx_sparse_format, sextant.h "sparse
 *      vectors"): a stored row that is not valid text must be refused, never crash or be misread.
 *      A text that parses must satisfy the format's rules (indexes strictly increasing and below
 *      2^32 - 1, values finite and >= 0), and format + parse must give back the same entries bit
 *      for bit; the counting form (NULL arrays) must count what the filling form fills; a cap
 *      one short must be refused.
 *   1-3  an analyzer (src/server/analyzer.c: english; standard; whitespace with lowercase, stop
 *      words and length) on the text as an insert or a BM25 query would run it: tokens are
 *      non-empty and at most 255 bytes, the term frequencies count every token once.
 * Errors are normal outcomes.
 */
#include <math.h>

#include "fuzz_common.h"
#include "server/analyzer.h"
#include "util/alloc.h"

static sx__analyzer *g_an[3];

static void tok_check(void *ctx, const char *t, size_t n)
{
    size_t *count = ctx;
    if (n == 0 || n > 255 || !t)
        abort();
    (*count)++;
}

/* The analyzer path: tokens well formed, frequencies summing to the token count. */
static void analyze(int which, const char *text)
{
    size_t count = 0;
    size_t n = sx__analyze(g_an[which], text, tok_check, &count);
    if (n != count)
        abort();
    uint32_t *idx = NULL;
    float *val = NULL;
    size_t k = 0;
    if (!sx__analyze_tf(g_an[which], text, &idx, &val, &k))
        return;
    double total = 0;
    for (size_t i = 0; i < k; i++) {
        if ((i > 0 && idx[i] <= idx[i - 1]) || idx[i] == UINT32_MAX || val[i] < 1)
            abort();
        total += (double)val[i];
    }
    if (total != (double)n)
        abort();
    sx__free(idx);
    sx__free(val);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    static const char *const params[3] = {
        "{\"type\":\"english\"}", "{\"type\":\"standard\"}",
        ("{\"tokenizer\":\"whitespace\",\"filter\":[\"lowercase\",{\"type\":\"stop\","
         "\"stop_words\":[\"_english_\",\"x\"]},{\"type\":\"length\",\"max\":12}]}")
    };
    for (int i = 0; i < 3; i++) {
        json_t *p = json_loads(params[i], 0, NULL);
        char why[256];
        g_an[i] = sx__analyzer_new(p, why, sizeof why);
        json_decref(p);
        if (!g_an[i])
            abort();
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    int which = data[0] % 4;
    char *text = malloc(size);
    if (!text)
        return 0;
    memcpy(text, data + 1, size - 1);
    text[size - 1] = '\0';
    if (which > 0) {
        analyze(which - 1, text);
        free(text);
        return 0;
    }
    size_t n = 0;
    if (sx_sparse_parse(text, NULL, NULL, 0, &n) != SX_OK) {
        free(text);
        return 0;
    }
    uint32_t *idx = malloc((n + 1) * sizeof *idx), *idx2 = malloc((n + 1) * sizeof *idx2);
    float *val = malloc((n + 1) * sizeof *val), *val2 = malloc((n + 1) * sizeof *val2);
    size_t m = 0, m2 = 0;
    if (!idx || !idx2 || !val || !val2 || sx_sparse_parse(text, idx, val, n, &m) != SX_OK || m != n)
        abort(); /* counted n entries: filling n must work */
    for (size_t i = 0; i < n; i++)
        if ((i > 0 && idx[i] <= idx[i - 1]) || idx[i] == UINT32_MAX || !isfinite(val[i]) ||
            val[i] < 0)
            abort();
    if (n > 0 && sx_sparse_parse(text, idx2, val2, n - 1, &m2) != SX_EINVAL)
        abort();
    size_t len = sx_sparse_format(idx, val, n, NULL, 0);
    char *again = malloc(len + 1);
    if (!again)
        abort();
    if (sx_sparse_format(idx, val, n, again, len + 1) != len || strlen(again) != len)
        abort();
    if (sx_sparse_parse(again, idx2, val2, n, &m2) != SX_OK || m2 != n ||
        memcmp(idx, idx2, n * sizeof *idx) != 0 || memcmp(val, val2, n * sizeof *val) != 0)
        abort();
    free(again);
    free(idx);
    free(idx2);
    free(val);
    free(val2);
    free(text);
    return 0;
}
