/*
 * err.c: thread-local error messages (see err.h), sx_status_str, and SX_ASSERT's failure report
 * (util/assert.h).
 */
#include "util/err.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/assert.h"

#undef sx__err /* the analyzer-only macros of err.h: these are the definitions */
#undef sx__err_errno

static _Thread_local char errbuf[512];

static const char *names[SX_STATUS_COUNT] = {
    [SX_OK] = "SX_OK",
    [SX_ENOMEM] = "SX_ENOMEM",
    [SX_EINVAL] = "SX_EINVAL",
    [SX_ENOTFOUND] = "SX_ENOTFOUND",
    [SX_EEXIST] = "SX_EEXIST",
    [SX_EIO] = "SX_EIO",
    [SX_ENOSPC] = "SX_ENOSPC",
    [SX_ECORRUPT] = "SX_ECORRUPT",
    [SX_EBUSY] = "SX_EBUSY",
    [SX_ECANCELED] = "SX_ECANCELED",
    [SX_ETIMEDOUT] = "SX_ETIMEDOUT",
    [SX_EREMOTE] = "SX_EREMOTE",
    [SX_EFATAL] = "SX_EFATAL",
    [SX_EPARSE] = "SX_EPARSE",
    [SX_EFENCED] = "SX_EFENCED",
    [SX_ESTALE] = "SX_ESTALE",
};

const char *sx_status_str(sx_status st)
{
    if ((unsigned)st >= SX_STATUS_COUNT)
        return "SX_UNKNOWN";
    return names[st];
}

const char *sx_errmsg(void)
{
    return errbuf;
}

void sx__err_clear(void)
{
    errbuf[0] = '\0';
}

sx_status sx__err(sx_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    return st;
}

sx_status sx__status_from_errno(int e)
{
    switch (e) {
    case ENOSPC:
    case EDQUOT:
        return SX_ENOSPC;
    case ENOMEM:
        return SX_ENOMEM;
    case ENOENT:
        return SX_ENOTFOUND;
    case EEXIST:
        return SX_EEXIST;
    default:
        return SX_EIO;
    }
}

sx_status sx__err_errno(int e, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(errbuf, sizeof errbuf, fmt, ap);
    va_end(ap);
    if (n >= 0 && (size_t)n < sizeof errbuf)
        (void)snprintf(errbuf + n, sizeof errbuf - (size_t)n, ": %s", strerror(e));
    return sx__status_from_errno(e);
}

void sx__assert_fail(const char *cond, const char *file, int line)
{
    (void)fprintf(stderr, "sextant: assertion failed: %s (%s:%d)\n", cond, file, line);
    abort();
}
