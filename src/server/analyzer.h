/*
 * analyzer.h: Milvus's text analyzers for full-text search (BM25), English only: the tokenizers,
 * filters and stemmer are described at the top of analyzer.c.
 * Thread-safety: an analyzer is immutable once made; any thread may run it.
 */
#ifndef SX_SERVER_ANALYZER_H
#define SX_SERVER_ANALYZER_H
#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct sx__analyzer sx__analyzer;

/* An analyzer from Milvus's analyzer_params (NULL: the standard analyzer). NULL with why[] set on
 * a type, tokenizer, filter or language Sextant does not serve. Free with sx__analyzer_free. */
sx__analyzer *sx__analyzer_new(const json_t *params, char *why, size_t cap);
void sx__analyzer_free(sx__analyzer *a);
/* Runs the analyzer on a NUL-terminated text: emit(ctx, token, length) for every token kept, in
 * order (token not NUL-terminated past length; emit may be NULL). Returns the tokens kept. */
size_t sx__analyze(const sx__analyzer *a,
                   const char *text,
                   void (*emit)(void *ctx, const char *tok, size_t n),
                   void *ctx);
/* The term frequencies of a text (BM25's document and query vectors): *idx ascending distinct
 * token indexes, *val their counts, *n of them (both sx__malloc'd; free them). False only when
 * memory runs out. */
bool sx__analyze_tf(
    const sx__analyzer *a, const char *text, uint32_t **idx, float **val, size_t *n);
/* The sparse index of a token (a hash, never 2^32 - 1). */
uint32_t sx__token_index(const char *tok, size_t n);
/* The Snowball English stemmer on a lowercase ASCII word w of *n letters (buffer of at least
 * *n + 1 bytes), in place. For tests. */
void sx__stem_english(char *w, size_t *n);

#endif
