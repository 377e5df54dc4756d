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

/* Explicitly discards a status (best-effort cleanup whose failure changes nothing). */
static inline void sx__ignore(sx_status st)
{
    (void)st;
}

#endif
