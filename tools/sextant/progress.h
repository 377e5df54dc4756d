/*
 * progress.h: a one-line status for long phases of `sextant bench` (ingest, index build, ground
 * truth), redrawn in place on stderr when stderr is a terminal and silent otherwise (logs and
 * pipes get only the tool's ordinary lines).
 *
 *   ingest      [#########...........]  45.0%  27000/60000 rows  12.1 s  eta 14.8 s
 *
 * Redraws are throttled to 10 per second; prog_end clears the line so the next ordinary message
 * starts on a clean line. Not thread-safe: one thread drives one progress line (the bench's
 * main thread).
 */
#ifndef SX_TOOLS_PROGRESS_H
#define SX_TOOLS_PROGRESS_H

#include <stdbool.h>
#include <stdint.h>

typedef struct prog {
    bool on;          /* stderr is a terminal (and SX_NO_PROGRESS is unset) */
    char label[24];   /* phase name */
    const char *unit; /* "rows", "queries" */
    uint64_t total;
    double t0, last; /* start, last redraw (CLOCK_MONOTONIC s) */
    bool drawn;
} prog;

/* Starts a progress line for `total` units (0: unknown, no bar). */
void prog_begin(prog *p, const char *label, const char *unit, uint64_t total);
/* Reports `done` units (redraws at most every 100 ms). */
void prog_update(prog *p, uint64_t done);
/* Clears the line. */
void prog_end(prog *p);

#endif /* SX_TOOLS_PROGRESS_H */
