/*
 * deadline.c: the per-thread deadline of engine reads (see deadline.h and sx_deadline_set in
 * sextant.h). A thread-local was chosen over a field in every request struct so that the five
 * read entry points (search, query, count, get, delete by filter) and the filter evaluator deep
 * below them see it without changing their signatures; the REST layer sets it once per request.
 * Rejected: a timer thread that flips a flag (a thread, and a flag per request to cancel).
 */
#include "util/deadline.h"

#include <time.h>

#include "util/err.h"

static _Thread_local sx__deadline tl;

int64_t sx_clock_ns(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t sx_deadline_set(int64_t deadline_ns)
{
    int64_t prev = tl.at_ns;
    tl.at_ns = deadline_ns > 0 ? deadline_ns : 0;
    tl.set_ns = deadline_ns > 0 ? sx_clock_ns() : 0;
    return prev;
}

sx__deadline sx__deadline_get(void)
{
    return tl;
}

sx__deadline sx__deadline_install(sx__deadline d)
{
    sx__deadline prev = tl;
    tl = d;
    return prev;
}

void sx__deadline_report(const sx__deadline *d)
{
    int64_t ms = (sx_clock_ns() - d->set_ns) / 1000000;
    (void)sx__err(SX_ETIMEDOUT, "deadline exceeded after %lld ms", (long long)(ms > 0 ? ms : 0));
}

sx_status sx__deadline_check(const sx__deadline *d)
{
    if (d->at_ns == 0 || sx_clock_ns() < d->at_ns)
        return SX_OK;
    sx__deadline_report(d);
    return SX_ETIMEDOUT;
}

sx_status sx__deadline_check_ambient(void)
{
    return tl.at_ns ? sx__deadline_check(&tl) : SX_OK;
}
