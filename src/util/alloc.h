/*
 * alloc.h: every allocation in Sextant goes through these wrappers so that fault tests can fail the
 * N-th allocation (sx__alloc_fail_after) and count live allocations.
 * Thread-safety: all functions are thread-safe (the countdown is an atomic).
 */
#ifndef SX_UTIL_ALLOC_H
#define SX_UTIL_ALLOC_H
#include <stddef.h>

void *sx__malloc(size_t n);
void *sx__calloc(size_t count, size_t size);
void *sx__realloc(void *p, size_t n);
/* 64-byte aligned; free with sx__free_aligned. */
void *sx__malloc_aligned(size_t n);
void sx__free_aligned(void *p);
void sx__free(void *p);
char *sx__strdup(const char *s);
char *sx__strndup(const char *s, size_t n);
/* Fault injection: the n-th allocation from now fails (n >= 1); 0 disables. */
void sx__alloc_fail_after(long n);

/* For clang-tidy's static analyzer only (`make lint`). It sees one file at a time, so the wrappers
 * are opaque to it: every field of a fresh sx__calloc'ed struct looked like an unknown value (a
 * count that may be non-zero, a pointer that may be NULL) and sx__free ended no lifetime. Here
 * they are spelled as the libc calls it models (calloc zeroes; free releases, so a use after
 * sx__free or a double sx__free is reported), with the wrappers' rounding of 0 bytes up to 1
 * written without a branch (n + (n == 0)) so that it splits no paths. sx__malloc stays opaque:
 * modelled, its memory is uninitialised, and the analyzer then takes buffers that loops fill in
 * ways it cannot follow (tiles, a selection sample) for garbage. The compiled code calls the
 * wrappers (alloc.c, which defines them, undefines these). */
#ifdef __clang_analyzer__
# include <stdlib.h>
# include <string.h>
# define sx__calloc(c, s)  calloc((c) + ((c) == 0), (s) + ((s) == 0))
# define sx__realloc(p, n) realloc((p), (n) + ((n) == 0))
# define sx__free(p)       free(p)
# define sx__strdup(s)     strdup(s)
# define sx__strndup(s, n) strndup((s), (n))
#endif

#endif
