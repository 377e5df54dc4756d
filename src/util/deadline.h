/*
 * deadline.h: the calling thread's deadline for engine reads (issue 13): sx_deadline_set in
 * sextant.h installs it; the engine checks it at the entry of sx_search / sx_query / sx_count /
 * sx_get / sx_delete_where, between segments, per chunk of filter evaluation (sx__expr_eval, every
 * 1024 rows), per block of an exact scan, between the queries of an index search and every 1024
 * expansions of a filtered graph search (graph.h). Worker threads get the deadline explicitly
 * (sx__deadline, copied into their job, which installs it as the worker's own for the job).
 *
 * Cost: with no deadline a check is one thread-local load and a compare; with one, a
 * clock_gettime(CLOCK_MONOTONIC) (vDSO, ~20 ns) per check, and checks are placed at most once
 * per ~1k rows / one query, so the overhead is far below 1%.
 *
 * Thread-safety: the ambient value is per thread; an sx__deadline is a plain value, copied.
 */
#ifndef SX_UTIL_DEADLINE_H
#define SX_UTIL_DEADLINE_H
#include <sextant.h>
#include <stdint.h>

/* A deadline: at_ns (CLOCK_MONOTONIC, 0 = none) and set_ns (when it was installed, for the
 * message). */
typedef struct sx__deadline {
    int64_t at_ns;
    int64_t set_ns;
} sx__deadline;

/* The calling thread's deadline (at_ns 0 when none). */
sx__deadline sx__deadline_get(void);

/* SX_OK, or SX_ETIMEDOUT "deadline exceeded after N ms" (N: since sx_deadline_set) once
 * CLOCK_MONOTONIC has reached d->at_ns. */
SX_NODISCARD sx_status sx__deadline_check(const sx__deadline *d);

/* Makes d the calling thread's deadline (a worker taking its caller's: index searches then see
 * it); returns the previous one, to be put back the same way. */
sx__deadline sx__deadline_install(sx__deadline d);

/* Records the SX_ETIMEDOUT message of d on the calling thread (a worker's check recorded it
 * on the worker's). */
void sx__deadline_report(const sx__deadline *d);

/* sx__deadline_check on the calling thread's deadline. */
SX_NODISCARD sx_status sx__deadline_check_ambient(void);

#endif
