/*
 * report.h: benchmark reports from `sextant bench` result files (issue 6).
 *
 *   sextant bench report A.json [B.json ...] -o report.html   self-contained HTML, inline SVG
 *   sextant bench compare A.json B.json [...]                 side-by-side table with ratios
 *
 * The result JSON schema is documented in docs/BENCH-RESULTS.md. Several files (runs of
 * different indexes, peers, machines) are drawn on the same charts.
 */
#ifndef SX_TOOLS_REPORT_H
#define SX_TOOLS_REPORT_H
#include <stddef.h>

/* Writes the HTML report of the given result files to html_path. Returns 0, or prints the
 * reason to stderr and returns 1 (unreadable/invalid JSON names the file and position). */
int report_write_html(const char *const *json_paths, size_t n, const char *html_path);

/* Subcommands (argv[0] is "report" / "compare"). Exit codes as cli.h. */
int cli_bench_report(int argc, char **argv);
int cli_bench_compare(int argc, char **argv);

#endif
