/*
 * err.h: the thread-local error message behind sx_errmsg(), and helpers to set it.
 * sx__err(st, fmt, ...) records the message and returns st, so error paths read
 *   return sx__err(SX_EINVAL, "dim %u out of range 1..%u", dim, SX_MAX_DIM);
 * sx__err_errno maps an errno to SX_EIO / SX_ENOSPC / SX_ENOMEM and appends strerror.
 */
#ifndef SX_UTIL_ERR_H
#define SX_UTIL_ERR_H
#include <sextant.h>

sx_status sx__err(sx_status st, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sx_status sx__err_errno(int e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
sx_status sx__status_from_errno(int e);
void sx__err_clear(void);

/* For clang-tidy's static analyzer only (tests/lint, `make lint`). It sees one file at a time, so
 * it does not know that sx__err returns st and that sx__err_errno never returns SX_OK: it then
 * walks every `st = sx__err(SX_ENOMEM, ...)` path as if st could be SX_OK and reports the null
 * dereferences that follow. Here both facts are spelled out for it; the compiled code calls the
 * functions as declared above (err.c, which defines them, undefines these). */
#ifdef __clang_analyzer__
static inline sx_status sx__err_analyzer_not_ok(sx_status st)
{
    if (st == SX_OK)
        __builtin_unreachable();
    return st;
}

# define sx__err(st, ...)      (sx__err((st), __VA_ARGS__), (st))
# define sx__err_errno(e, ...) sx__err_analyzer_not_ok(sx__err_errno((e), __VA_ARGS__))
#endif

/* Explicitly discards a status (best-effort cleanup whose failure changes nothing). */
static inline void sx__ignore(sx_status st)
{
    (void)st;
}

#endif
