/*
 * fuzz_sparse.c: libFuzzer harness for the engine's sparse-vector text (sx_sparse_parse /
 * sx_sparse_format, sextant.h "sparse vectors"): a stored row that is not valid text must be
 * refused, never crash or be misread. The input is the text (cut at the first NUL byte). A text
 * that parses must satisfy the format's rules (indexes strictly increasing and below 2^32 - 1,
 * values finite and >= 0), and format + parse must give back the same entries bit for bit; the
 * counting form (NULL arrays) must count what the filling form fills; a cap one short must be
 * refused. Errors are normal outcomes.
 */
#include <math.h>

#include "fuzz_common.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
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
