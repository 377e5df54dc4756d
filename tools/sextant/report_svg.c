/*
 * report_svg.c: text buffer, XML escaping and the SVG charts of `sextant bench report`
 * (interface and design: report_svg.h).
 *
 * Geometry. Every chart is CHART_W wide; the plot area sits inside fixed margins (left for the
 * value tick labels, bottom for the x tick labels and the axis title) and the legend is laid out
 * below it in one or two columns, so the SVG height grows with the number of series instead of
 * the legend covering the data. Coordinates are written with one decimal.
 *
 * Scales. Linear axes get "nice" ticks (1, 2, 2.5 or 5 times a power of ten, about 5 of them)
 * and a range rounded out to whole steps; log axes span whole decades, with ticks at 1-2-5 when
 * the range covers at most two decades. A fixed range is widened to the data so no point ever
 * falls outside the frame (no clipping, which would need url(#id) references). A unit-interval
 * axis (fit_unit: the recall axis) fits the data with a margin of a tenth of its span, inside
 * [0, 1], so points spread over the plot instead of bunching where a fixed 0.5..1 put them.
 *
 * Text widths are estimated (AVG_CHAR_W per character at the 11px font) since nothing measures
 * text without a renderer; long category labels are shortened with an ellipsis and keep their
 * full text in a <title> tooltip.
 */
#include "report_svg.h"

#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* NAN is a float in glibc; -Wdouble-promotion wants it typed */
#define DNAN        ((double)NAN)
#define CHART_W     880.0
#define MARGIN_L    84.0
#define MARGIN_R    28.0
#define MARGIN_T    40.0
#define MARGIN_B    56.0
#define PLOT_H      320.0
#define LEGEND_ROW  18.0
#define AVG_CHAR_W  6.4
#define MAX_TICKS   64
#define LABEL_CHARS 54

/* ------------------------------------------------------------------ buffer */

static void rb_grow(rbuf *b, size_t need)
{
    if (b->oom || b->len + need + 1 <= b->cap)
        return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->len + need + 1) {
        if (cap > SIZE_MAX / 2) {
            b->oom = true;
            return;
        }
        cap *= 2;
    }
    char *np = realloc(b->p, cap);
    if (np == NULL) {
        b->oom = true;
        return;
    }
    b->p = np;
    b->cap = cap;
}

void rb_printf(rbuf *b, const char *fmt, ...)
{
    if (b->oom)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = true;
        return;
    }
    rb_grow(b, (size_t)n);
    if (b->oom)
        return;
    va_start(ap, fmt);
    (void)vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void rb_puts(rbuf *b, const char *s)
{
    size_t n = strlen(s);
    rb_grow(b, n);
    if (b->oom)
        return;
    memcpy(b->p + b->len, s, n + 1);
    b->len += n;
}

/* Length of the valid UTF-8 sequence at p (1..4), or 0 when it is not one (overlong forms,
 * surrogates and code points above U+10FFFF are invalid, as XML requires). */
static size_t utf8_len(const unsigned char *p)
{
    unsigned c = p[0];
    size_t n;
    unsigned cp;
    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf) {
        n = 2;
        cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
        n = 3;
        cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
        n = 4;
        cp = c & 0x07;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) || cp > 0x10ffff ||
        (cp >= 0xd800 && cp <= 0xdfff) || cp == 0xfffe || cp == 0xffff)
        return 0;
    return n;
}

void rb_esc(rbuf *b, const char *s)
{
    if (s == NULL)
        return;
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        switch (*p) {
        case '&':
            rb_puts(b, "&amp;");
            p++;
            continue;
        case '<':
            rb_puts(b, "&lt;");
            p++;
            continue;
        case '>':
            rb_puts(b, "&gt;");
            p++;
            continue;
        case '"':
            rb_puts(b, "&quot;");
            p++;
            continue;
        case '\'':
            rb_puts(b, "&#39;");
            p++;
            continue;
        default:
            break;
        }
        if (*p < 0x20 && *p != '\t' && *p != '\n' && *p != '\r') {
            p++;
            continue;
        }
        size_t n = utf8_len(p);
        if (n == 0) {
            rb_puts(b, "?");
            p++;
            continue;
        }
        rb_grow(b, n);
        if (b->oom)
            return;
        memcpy(b->p + b->len, p, n);
        b->len += n;
        b->p[b->len] = '\0';
        p += n;
    }
}

/* Appends at most max_chars characters (UTF-8 aware) of s, escaped, with an ellipsis when cut.
 * Returns true when s was shortened. */
static bool rb_esc_short(rbuf *b, const char *s, size_t max_chars)
{
    size_t chars = 0, bytes = 0;
    const unsigned char *p = (const unsigned char *)s;
    while (p[bytes] && chars < max_chars) {
        size_t n = utf8_len(p + bytes);
        bytes += n ? n : 1;
        chars++;
    }
    if (p[bytes] == '\0') {
        rb_esc(b, s);
        return false;
    }
    char *cut = strndup(s, bytes);
    if (cut == NULL) {
        b->oom = true;
        return true;
    }
    rb_esc(b, cut);
    free(cut);
    rb_puts(b, "\xe2\x80\xa6"); /* U+2026 HORIZONTAL ELLIPSIS */
    return true;
}

/* Characters (not bytes) of a UTF-8 string, for width estimates. */
static size_t text_chars(const char *s)
{
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)s; p && *p; p++)
        n += (*p & 0xc0) != 0x80;
    return n;
}

/* ------------------------------------------------------------------ numbers */

static const char *const palette[SVG_PALETTE] = {
    "#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f",
    "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#6b6b6b",
};

const char *svg_color(int i)
{
    if (i < 0)
        i = -i;
    return palette[i % SVG_PALETTE];
}

/* %.*g without a trailing "e+00"-style exponent for the magnitudes charts show. */
const char *svg_fmt_num(double v, char *buf, size_t len)
{
    double a = fabs(v);
    if (isnan(v))
        snprintf(buf, len, "n/a");
    else if (a >= 1e9)
        snprintf(buf, len, "%.3gG", v / 1e9);
    else if (a >= 1e6)
        snprintf(buf, len, "%.3gM", v / 1e6);
    else if (a >= 1e4)
        snprintf(buf, len, "%.3gk", v / 1e3);
    else if (a >= 1000)
        snprintf(buf, len, "%.0f", v);
    else if (a == 0)
        snprintf(buf, len, "0");
    else if (a < 1e-3)
        snprintf(buf, len, "%.2e", v);
    else
        snprintf(buf, len, "%.3g", v);
    return buf;
}

const char *svg_fmt_value(double v, svg_unit u, char *buf, size_t len)
{
    static const char *const bunits[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    char nb[32];
    switch (u) {
    case SVG_UNIT_SEC:
        if (fabs(v) < 1.0 && v != 0)
            snprintf(buf, len, "%s ms", svg_fmt_num(v * 1000.0, nb, sizeof nb));
        else
            snprintf(buf, len, "%s s", svg_fmt_num(v, nb, sizeof nb));
        return buf;
    case SVG_UNIT_MS:
        snprintf(buf, len, "%s ms", svg_fmt_num(v, nb, sizeof nb));
        return buf;
    case SVG_UNIT_BYTES: {
        size_t i = 0;
        double x = v;
        while (fabs(x) >= 1024.0 && i + 1 < sizeof bunits / sizeof bunits[0]) {
            x /= 1024.0;
            i++;
        }
        if (i == 0)
            snprintf(buf, len, "%.0f B", x);
        else
            snprintf(buf, len, "%.3g %s", x, bunits[i]);
        return buf;
    }
    case SVG_UNIT_NUM:
        break;
    }
    return svg_fmt_num(v, buf, len);
}

/* ------------------------------------------------------------------ scales */

typedef struct scale {
    svg_scale kind;
    double lo, hi; /* data space (log: the values, not their logs) */
    double p0, p1; /* pixel space */
    double ticks[MAX_TICKS];
    size_t n_ticks;
    size_t n_cats;
} scale;

static double nice_step(double range)
{
    double raw = range / 5.0;
    double mag = pow(10.0, floor(log10(raw)));
    double f = raw / mag;
    double m = f < 1.5 ? 1.0 : f < 2.25 ? 2.0 : f < 3.5 ? 2.5 : f < 7.5 ? 5.0 : 10.0;
    return m * mag;
}

static bool usable(double v, svg_scale k)
{
    return isfinite(v) && (k != SVG_LOG || v > 0);
}

/* Sets lo/hi/ticks from the axis description and the data range [dmin, dmax] (NaN: none). */
static void scale_fit(scale *s, const svg_axis *a, double dmin, double dmax, double unit)
{
    s->kind = a->scale;
    s->n_ticks = 0;
    if (a->scale == SVG_CATEGORY) {
        s->n_cats = a->n_cats ? a->n_cats : 1;
        s->lo = -0.5;
        s->hi = (double)s->n_cats - 0.5;
        for (size_t i = 0; i < a->n_cats && i < MAX_TICKS; i++)
            s->ticks[s->n_ticks++] = (double)i;
        return;
    }
    double lo = dmin, hi = dmax;
    if (a->fit_unit && !a->fixed && !isnan(lo) && !isnan(hi)) {
        /* data in [0, 1] (recall): a margin of a tenth of the span (at least 0.005) each side,
         * kept inside [0, 1], then rounded out to whole steps below */
        double pad = (hi - lo) * 0.1 > 0.005 ? (hi - lo) * 0.1 : 0.005;
        lo = lo - pad < 0 ? 0 : lo - pad;
        hi = hi + pad > 1 ? 1 : hi + pad;
    }
    if (a->fixed) {
        lo = isnan(dmin) || a->lo < dmin ? a->lo : dmin;
        hi = isnan(dmax) || a->hi > dmax ? a->hi : dmax;
    }
    if (isnan(lo) || isnan(hi)) {
        lo = a->scale == SVG_LOG ? 1 : 0;
        hi = a->scale == SVG_LOG ? 10 : 1;
    }
    if (a->scale == SVG_LOG) {
        double l0 = floor(log10(lo)), l1 = ceil(log10(hi));
        if (l1 <= l0)
            l1 = l0 + 1;
        s->lo = pow(10.0, l0);
        s->hi = pow(10.0, l1);
        bool fine = l1 - l0 <= 2;
        for (double e = l0; e <= l1 && s->n_ticks + 3 <= MAX_TICKS; e += 1.0) {
            double d = pow(10.0, e);
            s->ticks[s->n_ticks++] = d;
            if (fine && e < l1) {
                s->ticks[s->n_ticks++] = 2 * d;
                s->ticks[s->n_ticks++] = 5 * d;
            }
        }
        return;
    }
    if (a->zero && !a->fixed) {
        if (lo > 0)
            lo = 0;
        if (hi < 0)
            hi = 0;
    }
    if (hi - lo <= 0) {
        double pad = lo == 0 ? 1 : fabs(lo) * 0.1;
        lo -= pad;
        hi += pad;
        if (a->zero && lo < 0 && dmin >= 0)
            lo = 0;
    }
    /* steps in whole units (bytes: KiB, MiB, ... so ticks read 2 MiB, not 2.38 MiB) */
    double step = nice_step((hi - lo) / unit) * unit;
    /* round out to whole steps, except where a fixed bound holds */
    if (!a->fixed || lo < a->lo)
        lo = floor(lo / step + 1e-9) * step;
    if (!a->fixed || hi > a->hi)
        hi = ceil(hi / step - 1e-9) * step;
    if (a->fit_unit && !a->fixed) {
        lo = lo < 0 ? 0 : lo;
        hi = hi > 1 ? 1 : hi;
    }
    s->lo = lo;
    s->hi = hi;
    double t0 = ceil(lo / step - 1e-9) * step;
    for (double t = t0; t <= hi + step * 1e-9 && s->n_ticks < MAX_TICKS; t += step)
        s->ticks[s->n_ticks++] = fabs(t) < step * 1e-9 ? 0 : t;
}

static double scale_px(const scale *s, double v)
{
    double f;
    if (s->kind == SVG_LOG)
        f = (log10(v) - log10(s->lo)) / (log10(s->hi) - log10(s->lo));
    else
        f = (v - s->lo) / (s->hi - s->lo);
    return s->p0 + f * (s->p1 - s->p0);
}

/* ------------------------------------------------------------------ pieces */

/* Opens a chart: `extra` is appended to the class list, `attrs` (already escaped, may be "")
 * written as more attributes. */
static void svg_open(
    rbuf *b, const char *kind, const char *title, double h, const char *extra, const char *attrs)
{
    rb_printf(b, "<svg class=\"chart%s\" data-chart=\"", extra);
    rb_esc(b, kind);
    rb_printf(b,
              "\"%s width=\"%.0f\" height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
              "aria-label=\"",
              attrs, CHART_W, h, CHART_W, h);
    rb_esc(b, title);
    rb_puts(b, "\">\n<title>");
    rb_esc(b, title);
    rb_printf(b, "</title>\n<text class=\"ctitle\" x=\"%.1f\" y=\"22\">", MARGIN_L);
    rb_esc(b, title);
    rb_puts(b, "</text>\n");
}

static void marker(rbuf *b, int kind, double x, double y, const char *color)
{
    switch (kind & 3) {
    case 0:
        rb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"", x, y, color);
        break;
    case 1:
        rb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"7\" height=\"7\" fill=\"%s\"", x - 3.5,
                  y - 3.5, color);
        break;
    case 2:
        rb_printf(b, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"", x, y - 4.5,
                  x + 4.5, y + 3.5, x - 4.5, y + 3.5, color);
        break;
    default:
        rb_printf(b, "<polygon points=\"%.1f,%.1f %.1f,%.1f %.1f,%.1f %.1f,%.1f\" fill=\"%s\"", x,
                  y - 5, x + 5, y, x, y + 5, x - 5, y, color);
        break;
    }
}

static const char *marker_end(int kind)
{
    switch (kind & 3) {
    case 0:
        return "</circle>";
    case 1:
        return "</rect>";
    default:
        return "</polygon>";
    }
}

typedef struct legend_item {
    const char *name;
    int color, marker;
    bool dashed, line;
} legend_item;

/* Legend layout: two columns when every name fits half the width. Returns the rows. */
static size_t legend_rows(const char *const *names, size_t n, size_t *cols)
{
    double half = (CHART_W - MARGIN_L - MARGIN_R) / 2.0;
    *cols = 2;
    for (size_t i = 0; i < n; i++)
        if ((double)text_chars(names[i]) * AVG_CHAR_W + 30 > half)
            *cols = 1;
    return (n + *cols - 1) / *cols;
}

static void legend(rbuf *b, const legend_item *it, size_t n, size_t cols, double y0)
{
    double colw = (CHART_W - MARGIN_L - MARGIN_R) / (double)cols;
    rb_puts(b, "<g class=\"legend\">\n");
    for (size_t i = 0; i < n; i++) {
        size_t col = i % cols, row = i / cols; /* the legend's grid cell */
        double x = MARGIN_L + (double)col * colw;
        double y = y0 + (double)row * LEGEND_ROW;
        const char *c = svg_color(it[i].color);
        if (it[i].line) {
            rb_printf(b,
                      "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" "
                      "stroke-width=\"2\"%s/>",
                      x, y, x + 22, y, c, it[i].dashed ? " stroke-dasharray=\"5,3\"" : "");
            marker(b, it[i].marker, x + 11, y, c);
            rb_puts(b, "/>");
        } else {
            rb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"14\" height=\"10\" fill=\"%s\"/>",
                      x + 4, y - 5, c);
        }
        rb_printf(b, "<text class=\"lg\" x=\"%.1f\" y=\"%.1f\">", x + 30, y + 4);
        rb_esc(b, it[i].name);
        rb_puts(b, "</text>\n");
    }
    rb_puts(b, "</g>\n");
}

/* Tick label text for a value on a scale of the given unit. */
static const char *tick_text(double v, svg_unit u, char *buf, size_t len)
{
    return svg_fmt_value(v, u, buf, len);
}

/* ------------------------------------------------------------------ line chart */

void svg_line_chart(rbuf *b,
                    const char *kind,
                    const char *title,
                    const svg_axis *x,
                    const svg_axis *y,
                    const svg_series *s,
                    size_t n_series)
{
    double xmin = DNAN, xmax = DNAN, ymin = DNAN, ymax = DNAN;
    size_t drawable = 0;
    for (size_t i = 0; i < n_series; i++) {
        for (size_t j = 0; j < s[i].n; j++) {
            double xv = s[i].x[j], yv = s[i].y[j];
            if (!usable(xv, x->scale == SVG_CATEGORY ? SVG_LINEAR : x->scale) ||
                !usable(yv, y->scale))
                continue;
            if (x->scale == SVG_CATEGORY && (xv < 0 || xv >= (double)x->n_cats))
                continue;
            drawable++;
            xmin = isnan(xmin) || xv < xmin ? xv : xmin;
            xmax = isnan(xmax) || xv > xmax ? xv : xmax;
            ymin = isnan(ymin) || yv < ymin ? yv : ymin;
            ymax = isnan(ymax) || yv > ymax ? yv : ymax;
        }
    }
    if (drawable == 0) {
        svg_no_data(b, kind, title, "no data points to draw");
        return;
    }
    const char **names = calloc(n_series ? n_series : 1, sizeof *names);
    legend_item *items = calloc(n_series ? n_series : 1, sizeof *items);
    if (names == NULL || items == NULL) {
        free(names);
        free(items);
        b->oom = true;
        return;
    }
    for (size_t i = 0; i < n_series; i++) {
        names[i] = s[i].name ? s[i].name : "";
        items[i] = (legend_item){ names[i], s[i].color, s[i].marker, s[i].dashed, true };
    }
    size_t cols;
    size_t rows = legend_rows(names, n_series, &cols);
    double h = MARGIN_T + PLOT_H + MARGIN_B + (double)rows * LEGEND_ROW + 12;
    scale sx, sy;
    scale_fit(&sx, x, xmin, xmax, 1.0);
    scale_fit(&sy, y, ymin, ymax, 1.0);
    sx.p0 = MARGIN_L;
    sx.p1 = CHART_W - MARGIN_R;
    sy.p0 = MARGIN_T + PLOT_H;
    sy.p1 = MARGIN_T;

    /* the x range drawn, for readers of the file (the e2e test checks the recall axis) */
    char xr[96] = "";
    if (x->scale != SVG_CATEGORY)
        (void)snprintf(xr, sizeof xr, " data-x-lo=\"%.6g\" data-x-hi=\"%.6g\"", sx.lo, sx.hi);
    svg_open(b, kind, title, h, "", xr);
    /* gridlines and ticks */
    char tb[64];
    rb_puts(b, "<g class=\"grid\">\n");
    for (size_t i = 0; i < sx.n_ticks; i++) {
        double px = scale_px(&sx, sx.ticks[i]);
        rb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px, sy.p1, px,
                  sy.p0);
    }
    for (size_t i = 0; i < sy.n_ticks; i++) {
        double py = scale_px(&sy, sy.ticks[i]);
        rb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", sx.p0, py, sx.p1,
                  py);
    }
    rb_puts(b, "</g>\n<g class=\"axis\">\n");
    for (size_t i = 0; i < sx.n_ticks; i++) {
        double px = scale_px(&sx, sx.ticks[i]);
        rb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px, sy.p0, px,
                  sy.p0 + 5);
        rb_printf(b, "<text class=\"tx\" x=\"%.1f\" y=\"%.1f\">", px, sy.p0 + 18);
        if (x->scale == SVG_CATEGORY)
            rb_esc_short(b, x->cats[i], 14);
        else
            rb_esc(b, tick_text(sx.ticks[i], SVG_UNIT_NUM, tb, sizeof tb));
        rb_puts(b, "</text>\n");
    }
    for (size_t i = 0; i < sy.n_ticks; i++) {
        double py = scale_px(&sy, sy.ticks[i]);
        rb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", sx.p0 - 5, py,
                  sx.p0, py);
        rb_printf(b, "<text class=\"ty\" x=\"%.1f\" y=\"%.1f\">", sx.p0 - 8, py + 4);
        rb_esc(b, tick_text(sy.ticks[i], SVG_UNIT_NUM, tb, sizeof tb));
        rb_puts(b, "</text>\n");
    }
    rb_printf(b, "<text class=\"xl\" x=\"%.1f\" y=\"%.1f\">", (sx.p0 + sx.p1) / 2, sy.p0 + 40);
    rb_esc(b, x->label);
    rb_printf(b, "</text>\n<text class=\"yl\" transform=\"translate(18,%.1f) rotate(-90)\">",
              (sy.p0 + sy.p1) / 2);
    rb_esc(b, y->label);
    rb_printf(b,
              "</text>\n</g>\n<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
              "height=\"%.1f\"/>\n",
              sx.p0, sy.p1, sx.p1 - sx.p0, sy.p0 - sy.p1);

    /* series: the line, then its markers with a tooltip each */
    for (size_t i = 0; i < n_series; i++) {
        const char *c = svg_color(s[i].color);
        rb_printf(b,
                  "<polyline class=\"series s%zu\" fill=\"none\" stroke=\"%s\" "
                  "stroke-width=\"2\"%s points=\"",
                  i, c, s[i].dashed ? " stroke-dasharray=\"5,3\"" : "");
        bool first = true;
        for (size_t j = 0; j < s[i].n; j++) {
            double xv = s[i].x[j], yv = s[i].y[j];
            if (!usable(xv, x->scale == SVG_CATEGORY ? SVG_LINEAR : x->scale) ||
                !usable(yv, y->scale))
                continue;
            rb_printf(b, "%s%.1f,%.1f", first ? "" : " ", scale_px(&sx, xv), scale_px(&sy, yv));
            first = false;
        }
        rb_puts(b, "\"><title>");
        rb_esc(b, names[i]);
        rb_printf(b, "</title></polyline>\n<g class=\"markers m%zu\">", i);
        for (size_t j = 0; j < s[i].n; j++) {
            double xv = s[i].x[j], yv = s[i].y[j];
            if (!usable(xv, x->scale == SVG_CATEGORY ? SVG_LINEAR : x->scale) ||
                !usable(yv, y->scale))
                continue;
            marker(b, s[i].marker, scale_px(&sx, xv), scale_px(&sy, yv), c);
            rb_puts(b, "><title>");
            rb_esc(b, names[i]);
            rb_puts(b, ": ");
            if (x->scale == SVG_CATEGORY)
                rb_esc(b, x->cats[(size_t)xv]);
            else
                rb_esc(b, svg_fmt_num(xv, tb, sizeof tb));
            rb_puts(b, ", ");
            rb_esc(b, svg_fmt_num(yv, tb, sizeof tb));
            rb_printf(b, "</title>%s", marker_end(s[i].marker));
        }
        rb_puts(b, "</g>\n");
    }
    legend(b, items, n_series, cols, MARGIN_T + PLOT_H + MARGIN_B + 4);
    rb_puts(b, "</svg>\n");
    free(names);
    free(items);
}

/* ------------------------------------------------------------------ bar chart */

void svg_bar_chart(rbuf *b, const svg_bars *c)
{
    double vmin = DNAN, vmax = DNAN;
    size_t drawable = 0;
    svg_scale vs = c->log ? SVG_LOG : SVG_LINEAR;
    for (size_t i = 0; i < c->n_cats * c->n_series; i++) {
        if (!usable(c->v[i], vs))
            continue;
        drawable++;
        vmin = isnan(vmin) || c->v[i] < vmin ? c->v[i] : vmin;
        vmax = isnan(vmax) || c->v[i] > vmax ? c->v[i] : vmax;
    }
    if (drawable == 0) {
        svg_no_data(b, c->kind, c->title, "no values to draw");
        return;
    }
    legend_item *items = calloc(c->n_series ? c->n_series : 1, sizeof *items);
    if (items == NULL) {
        b->oom = true;
        return;
    }
    for (size_t k = 0; k < c->n_series; k++)
        items[k] = (legend_item){ c->series[k] ? c->series[k] : "",
                                  c->colors ? c->colors[k] : (int)k, 0, false, false };
    size_t longest = 0;
    for (size_t g = 0; g < c->n_cats; g++) {
        size_t n = text_chars(c->cats[g]);
        longest = n > longest ? n : longest;
    }
    if (longest > LABEL_CHARS)
        longest = LABEL_CHARS + 1;
    double left = (double)longest * AVG_CHAR_W + 16;
    left = left < MARGIN_L ? MARGIN_L : left;
    /* groups hold only their drawable bars, packed, so a group's label sits at its bars */
    double *gy = calloc(c->n_cats + 1, sizeof *gy);
    if (gy == NULL) {
        free(items);
        b->oom = true;
        return;
    }
    double bar_h = drawable > 24 ? 10 : 14, gap = 2, pad = 12;
    for (size_t g = 0; g < c->n_cats; g++) {
        size_t cnt = 0;
        for (size_t k = 0; k < c->n_series; k++)
            cnt += usable(c->v[g * c->n_series + k], vs);
        cnt = cnt ? cnt : 1;
        gy[g + 1] = gy[g] + (double)cnt * (bar_h + gap) - gap + pad;
    }
    double plot_h = gy[c->n_cats];
    size_t cols;
    size_t rows = legend_rows(c->series, c->n_series, &cols);
    double h = MARGIN_T + plot_h + MARGIN_B + (double)rows * LEGEND_ROW + 12;
    /* room at the right for the value label of the longest bar */
    svg_axis ax = { .label = c->value_label, .scale = vs, .zero = true };
    scale sv;
    double unit = 1.0;
    if (c->unit == SVG_UNIT_BYTES)
        while (unit * 1024.0 <= vmax)
            unit *= 1024.0;
    scale_fit(&sv, &ax, vmin, vmax, unit);
    sv.p0 = left;
    sv.p1 = CHART_W - MARGIN_R - 64;

    svg_open(b, c->kind, c->title, h, " bars", "");
    char tb[64];
    double top = MARGIN_T, bottom = MARGIN_T + plot_h;
    rb_puts(b, "<g class=\"grid\">\n");
    for (size_t i = 0; i < sv.n_ticks; i++) {
        double px = scale_px(&sv, sv.ticks[i]);
        rb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>\n", px, top, px,
                  bottom);
    }
    rb_puts(b, "</g>\n<g class=\"axis\">\n");
    for (size_t i = 0; i < sv.n_ticks; i++) {
        double px = scale_px(&sv, sv.ticks[i]);
        rb_printf(b, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>", px, bottom, px,
                  bottom + 5);
        rb_printf(b, "<text class=\"tx\" x=\"%.1f\" y=\"%.1f\">", px, bottom + 18);
        rb_esc(b, tick_text(sv.ticks[i], c->unit, tb, sizeof tb));
        rb_puts(b, "</text>\n");
    }
    for (size_t g = 0; g < c->n_cats; g++) {
        double cy = top + (gy[g] + gy[g + 1]) / 2;
        rb_printf(b, "<text class=\"ty\" x=\"%.1f\" y=\"%.1f\">", left - 8, cy + 4);
        const char *label = c->cats[g] ? c->cats[g] : "";
        if (text_chars(label) > LABEL_CHARS) {
            rb_puts(b, "<title>");
            rb_esc(b, label);
            rb_puts(b, "</title>");
        }
        rb_esc_short(b, label, LABEL_CHARS);
        rb_puts(b, "</text>\n");
    }
    rb_printf(b, "<text class=\"xl\" x=\"%.1f\" y=\"%.1f\">", (sv.p0 + sv.p1) / 2, bottom + 40);
    rb_esc(b, c->value_label);
    rb_printf(b,
              "</text>\n</g>\n<rect class=\"frame\" x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
              "height=\"%.1f\"/>\n",
              sv.p0, top, sv.p1 - sv.p0, plot_h);
    double base = c->log ? sv.p0 : scale_px(&sv, sv.lo > 0 ? sv.lo : 0);
    size_t *slot = calloc(c->n_cats ? c->n_cats : 1, sizeof *slot);
    if (slot == NULL) {
        free(gy);
        free(items);
        b->oom = true;
        return;
    }
    for (size_t k = 0; k < c->n_series; k++) {
        const char *col = svg_color(items[k].color);
        rb_printf(b, "<g class=\"series s%zu\" fill=\"%s\">", k, col);
        for (size_t g = 0; g < c->n_cats; g++) {
            double v = c->v[g * c->n_series + k];
            if (!usable(v, vs))
                continue;
            double y0 = top + gy[g] + pad / 2 + (double)slot[g]++ * (bar_h + gap);
            double px = scale_px(&sv, v);
            double x0 = px < base ? px : base, w = fabs(px - base);
            rb_printf(b, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\"><title>", x0,
                      y0, w < 0.5 ? 0.5 : w, bar_h);
            rb_esc(b, c->cats[g]);
            rb_puts(b, ", ");
            rb_esc(b, items[k].name);
            rb_puts(b, ": ");
            rb_esc(b, svg_fmt_value(v, c->unit, tb, sizeof tb));
            rb_printf(b, "</title></rect><text class=\"bv\" x=\"%.1f\" y=\"%.1f\">",
                      (px > base ? px : base) + 4, y0 + bar_h - 3);
            rb_esc(b, svg_fmt_value(v, c->unit, tb, sizeof tb));
            rb_puts(b, "</text>");
        }
        rb_puts(b, "</g>\n");
    }
    free(slot);
    legend(b, items, c->n_series, cols, bottom + MARGIN_B + 4);
    rb_puts(b, "</svg>\n");
    free(gy);
    free(items);
}

void svg_no_data(rbuf *b, const char *kind, const char *title, const char *note)
{
    double h = 90;
    svg_open(b, kind, title, h, " nodata", "");
    rb_printf(b,
              "<rect class=\"frame\" x=\"%.1f\" y=\"34\" width=\"%.1f\" height=\"44\"/>\n"
              "<text class=\"nd\" x=\"%.1f\" y=\"61\">",
              MARGIN_L, CHART_W - MARGIN_L - MARGIN_R, (CHART_W + MARGIN_L - MARGIN_R) / 2);
    rb_esc(b, note);
    rb_puts(b, "</text>\n</svg>\n");
}
