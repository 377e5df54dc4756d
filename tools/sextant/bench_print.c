/*
 * bench_print.c: Milvus Go-benchmark report lines (layout in bench_print.h). Moved here from
 * bench_remote.c so that the embedded concurrent search prints the same block.
 */
#include "bench_print.h"

#include <inttypes.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>

void bp_stamp(char *buf, size_t len)
{
    struct timeval tv;
    struct tm tm;
    gettimeofday(&tv, NULL);
    time_t t = tv.tv_sec;
    char base[32];
    if (localtime_r(&t, &tm) == NULL || strftime(base, sizeof base, "%Y-%m-%d %H:%M:%S", &tm) == 0)
        (void)snprintf(base, sizeof base, "?"); /* no local time, or it did not fit */
    snprintf(buf, len, "%s.%03d", base, (int)(tv.tv_usec / 1000));
}

void bp_block(uint64_t reqs,
              uint64_t fails,
              double avg_ms,
              double min_ms,
              double max_ms,
              double median_ms,
              double elapsed_s)
{
    char ts[48], fcol[48];
    bp_stamp(ts, sizeof ts);
    double pct = reqs ? 100.0 * (double)fails / (double)reqs : 0.0;
    snprintf(fcol, sizeof fcol, "%" PRIu64 "(%.2f%%)", fails, pct);
    double rps = elapsed_s > 0 ? (double)reqs / elapsed_s : 0.0;
    double fps = elapsed_s > 0 ? (double)fails / elapsed_s : 0.0;
    printf("[%s] %-10s%8s%13s  |%10s%10s%10s%10s  |%10s%12s\n", ts, "Name", "#   reqs", "# fails",
           "Avg", "Min", "Max", "Median", "req/s", "failures/s");
    printf("[%s] %-10s%8" PRIu64 "%13s  |%10.3f%10.3f%10.3f%10.3f  |%10.2f%12.2f\n", ts, "search",
           reqs, fcol, avg_ms, min_ms, max_ms, median_ms, rps, fps);
    (void)fflush(stdout);
}
