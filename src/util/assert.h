/*
 * assert.h: SX_ASSERT(cond), the assertion for invariants: states the code cannot reach, never
 * input validation (corrupt input returns SX_ECORRUPT; fuzzers enforce it).
 *
 * On in debug and sanitizer builds (SX_DEBUG, SX_SANITIZE, SX_TSAN: the builds with the
 * lock-rank checker): a false cond prints it with file:line and aborts. Off in release builds:
 * cond is not evaluated, so it must have no side effects (clang-tidy's bugprone-assert-side-effect
 * checks SX_ASSERT). Always on for clang-tidy's static analyzer (`make lint` analyses the release
 * build): an invariant stated here ends the analyzer's paths that contradict it, e.g. a field it
 * re-reads after an opaque call and then takes for NULL.
 * Thread-safety: any thread.
 */
#ifndef SX_UTIL_ASSERT_H
#define SX_UTIL_ASSERT_H

#define SX__ASSERT_CHECK(cond) ((cond) ? (void)0 : sx__assert_fail(#cond, __FILE__, __LINE__))
#if defined(SX_DEBUG) || defined(SX_SANITIZE) || defined(SX_TSAN) || defined(__clang_analyzer__)
# define SX_ASSERT(cond) SX__ASSERT_CHECK(cond)
#else
# define SX_ASSERT(cond) ((void)sizeof(cond))
#endif

/* Prints "sextant: assertion failed: COND (FILE:LINE)" to stderr and aborts. */
_Noreturn void sx__assert_fail(const char *cond, const char *file, int line);

#endif
