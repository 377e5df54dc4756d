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

#endif
