/*
 * alloc.c: allocation wrappers with a fault-injection countdown (see alloc.h), and the public
 * sx_strings_free (include/sextant.h), which frees the string arrays that every layer returns
 * (collection lists from the engine, key lists from the object stores in src/storage/): it
 * lives here, at the bottom of the layer stack, so that no layer has to call upwards for it.
 */
#include "util/alloc.h"

#include <sextant.h> /* sx_strings_free, exported (SX_API) */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* the analyzer-only macros of alloc.h: these are the definitions */
#undef sx__calloc
#undef sx__realloc
#undef sx__free
#undef sx__strdup
#undef sx__strndup

/* relaxed: the countdown only needs atomicity, not ordering with other memory */
static atomic_long fail_countdown;

static int should_fail(void)
{
    long v = atomic_load_explicit(&fail_countdown, memory_order_relaxed);
    if (v <= 0)
        return 0;
    v = atomic_fetch_sub_explicit(&fail_countdown, 1, memory_order_relaxed);
    return v == 1;
}

void sx__alloc_fail_after(long n)
{
    atomic_store_explicit(&fail_countdown, n, memory_order_relaxed);
}

void *sx__malloc(size_t n)
{
    if (should_fail())
        return NULL;
    return malloc(n ? n : 1);
}

void *sx__calloc(size_t count, size_t size)
{
    if (should_fail())
        return NULL;
    return calloc(count ? count : 1, size ? size : 1);
}

void *sx__realloc(void *p, size_t n)
{
    if (should_fail())
        return NULL;
    return realloc(p, n ? n : 1);
}

void *sx__malloc_aligned(size_t n)
{
    if (should_fail())
        return NULL;
    void *p = NULL;
    size_t rounded = (n + 63) & ~(size_t)63;
    if (posix_memalign(&p, 64, rounded ? rounded : 64) != 0)
        return NULL;
    return p;
}

void sx__free_aligned(void *p)
{
    free(p);
}

void sx__free(void *p)
{
    free(p);
}

char *sx__strdup(const char *s)
{
    return sx__strndup(s, strlen(s));
}

char *sx__strndup(const char *s, size_t n)
{
    char *d = sx__malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void sx_strings_free(char **names, size_t n)
{
    if (!names)
        return;
    for (size_t i = 0; i < n; i++)
        sx__free(names[i]);
    sx__free(names);
}
