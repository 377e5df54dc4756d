/*
 * report_svg.h: the drawing half of `sextant bench report` (report.c): a growable text buffer
 * with XML escaping, and charts written as inline SVG (line charts with markers on linear, log
 * or categorical axes; horizontal grouped bar charts). Private to tools/sextant.
 *
 * Design. The charts know nothing about benchmark results: report.c turns the result files into
 * series and categories and calls these. Every chart is one <svg class="chart"> element; each
 * series is exactly one element carrying class="series sN" (a <polyline> for lines, a <g> holding
 * the rects for bars), so a reader (or the e2e test) can count series per chart. Legends name
 * every series in full. Colours come from a fixed palette indexed by the caller, so one run keeps
 * its colour across charts. Output is well-formed XML (self-closed empty elements, only the five
 * XML entities, no control characters, invalid UTF-8 replaced), so an XML parser accepts the
 * report as well as an HTML one. No scripts, no external references.
 *
 * Thread-safety: none needed (single-threaded CLI); functions touch only their arguments.
 */
#ifndef SX_TOOLS_REPORT_SVG_H
#define SX_TOOLS_REPORT_SVG_H

#include <stdbool.h>
#include <stddef.h>

/* A growable string. Allocation failure sets oom and turns further appends into no-ops, so
 * callers check once at the end. Owned: free p. */
typedef struct rbuf {
    char *p;
    size_t len, cap;
    bool oom;
} rbuf;

void rb_printf(rbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rb_puts(rbuf *b, const char *s);
/* Appends s escaped for XML text and attribute values (& < > " '), control characters dropped,
 * invalid UTF-8 bytes replaced by '?'. NULL appends nothing. */
void rb_esc(rbuf *b, const char *s);

/* Number of palette colours; colour indices are taken modulo this. */
#define SVG_PALETTE 10
/* The palette colour i (mod SVG_PALETTE) as "#rrggbb". */
const char *svg_color(int i);

/* Formats v compactly for tick labels and tables ("12.3k", "0.95", "1.5M"). Returns buf. */
const char *svg_fmt_num(double v, char *buf, size_t len);

typedef enum svg_scale {
    SVG_LINEAR = 0,
    SVG_LOG = 1,      /* base 10; values <= 0 are not drawn */
    SVG_CATEGORY = 2, /* x only: values are indices into cats */
} svg_scale;

typedef struct svg_axis {
    const char *label;
    svg_scale scale;
    bool fixed; /* use lo..hi below (widened to the data when it falls outside) */
    double lo, hi;
    const char *const *cats; /* SVG_CATEGORY: n_cats labels */
    size_t n_cats;
    bool zero;     /* SVG_LINEAR auto range: include 0 */
    bool fit_unit; /* SVG_LINEAR auto range of [0, 1] data (recall): the data's
                      range plus a margin of a tenth of it (>= 0.005) per side,
                      within [0, 1] */
} svg_axis;

typedef struct svg_series {
    const char *name;
    const double *x, *y; /* n points; NaN or (log axis) <= 0 points are skipped */
    size_t n;
    int color;  /* palette index */
    int marker; /* 0 circle, 1 square, 2 triangle, 3 diamond (mod 4) */
    bool dashed;
} svg_series;

/* Writes a line chart: frame, gridlines, ticks, axis labels, one polyline + markers per series
 * and a legend. With no drawable point at all it writes svg_no_data() instead. `kind` becomes
 * the data-chart attribute (e.g. "recall-qps"); data-x-lo / data-x-hi carry the x range drawn. */
void svg_line_chart(rbuf *b,
                    const char *kind,
                    const char *title,
                    const svg_axis *x,
                    const svg_axis *y,
                    const svg_series *s,
                    size_t n_series);

/* Value formats for bar labels and the value axis. */
typedef enum svg_unit {
    SVG_UNIT_NUM = 0,
    SVG_UNIT_SEC = 1,
    SVG_UNIT_BYTES = 2,
    SVG_UNIT_MS = 3,
} svg_unit;

/* Formats v in the unit: "1.23 s" / "850 ms", "12.5 ms", "4 KiB" / "1.5 MiB", or as
 * svg_fmt_num. Returns buf. */
const char *svg_fmt_value(double v, svg_unit u, char *buf, size_t len);

typedef struct svg_bars {
    const char *kind; /* data-chart attribute */
    const char *title;
    const char *value_label; /* value axis label */
    svg_unit unit;
    bool log;                /* log value axis (values <= 0 not drawn) */
    const char *const *cats; /* groups, one row each */
    size_t n_cats;
    const char *const *series; /* bars within a group */
    const int *colors;         /* palette index per series, or NULL: 0, 1, 2, ... */
    size_t n_series;
    const double *v; /* v[cat * n_series + series]; NaN: no bar */
} svg_bars;

/* Writes a horizontal grouped bar chart with value labels and a legend; svg_no_data() when no
 * value is drawable. A series with no drawable value in any group is still listed (its <g> is
 * empty) so the series count matches the legend. */
void svg_bar_chart(rbuf *b, const svg_bars *c);

/* Writes a placeholder box: the title and a "no data" note (escaped). */
void svg_no_data(rbuf *b, const char *kind, const char *title, const char *note);

#endif /* SX_TOOLS_REPORT_SVG_H */
