/*
 * test_bench_report.c: `sextant bench report` and `sextant bench compare` (tools/sextant/report.c)
 * end to end, through the CLI binary ($SX_SEXTANT_BIN), on the result files in
 * tests/e2e/data/bench ($SX_SOURCE_DIR):
 *
 *   bigann10k_hnsw.json, bigann10k_ivf_flat.json   `sextant bench --json` (schema 1) on
 *                                                  BIGANN-10k with the hnswlib and FAISS peers
 *                                                  (the HNSW run also has 2-thread runs)
 *   remote_hnsw.json                               `sextant bench --target` against `sextant
 *                                                  serve` (levels 1, 2, 4, 8)
 *   schema2_cases.json                             schema 2 (docs/BENCH-RESULTS.md) written by
 *                                                  hand: cases performance, filter-99p,
 *                                                  streaming; a peer and a dataset name with
 *                                                  <&>"' in them
 *   bigann10k_cases.json                           schema 2 as `sextant bench` wrote it:
 *                                                  --concurrency 1,2,4 --filter-rate 0.01,0.99
 *                                                  --stream-rate 2000 --stream-stages 4
 *   fmnist_demo.json                               `make demo` (schema 2): Fashion-MNIST, HNSW,
 *                                                  hnswlib and FAISS peers, 1 and 2 threads
 *   compare_a.json, compare_b.json                 hand-picked numbers with known ratios
 *
 * Asserts:
 *   - report: exit 0, prints the output path, the file is well-formed XML (a strict checker
 *     here: balanced tags, quoted attributes, only the five XML entities or numeric ones, no
 *     stray '<' or '&'; and `xmllint --noout` when installed), has one <svg> per chart with the
 *     expected kinds and series counts (elements with class="series ...") and a legend entry
 *     per series, the legend names of runs and peers, escaped special characters (no raw <&>),
 *     no scripts and no src/href with "http" or "//"; a single run and runs without data draw
 *     "no data" placeholders; the default output path is the first input with .html;
 *   - compare: the text table's values and ratios for the hand-picked fixtures are exact, with
 *     better/worse by each metric's direction; --json carries the same ratios as numbers;
 *   - errors: missing file, corrupt JSON (message names file:line:column), empty file, a JSON
 *     without results, an unwritable output: exit 1; no files and unknown options: exit 2.
 */
#include <jansson.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "harness.h"

static const char *bin;
static char data_dir[1024];
static char tmp[600];
static char out_path[700], err_path[700];

/* ------------------------------------------------------------------ helpers */

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)n + 1);
    if (!p) {
        fclose(f);
        return NULL;
    }
    size_t got = fread(p, 1, (size_t)n, f);
    fclose(f);
    p[got] = '\0';
    return p;
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, strlen(text), f) != strlen(text)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

/* Runs `bin ARGS` with stdout and stderr captured; returns the exit status. */
static int run_cli(const char *args)
{
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' %s >'%s' 2>'%s'", bin, args, out_path, err_path);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static const char *fixture(const char *name)
{
    static char buf[4][1200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", data_dir, name);
    return buf[k];
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

/* ------------------------------------------------------------------ XML well-formedness */

static bool name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == ':' || c == '.';
}

/* Checks an entity at p (p[0] == '&'); returns its length or 0. */
static size_t entity_len(const char *p)
{
    static const char *const named[] = { "&amp;", "&lt;", "&gt;", "&quot;", "&apos;" };
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        if (strncmp(p, named[i], strlen(named[i])) == 0)
            return strlen(named[i]);
    if (p[1] != '#')
        return 0;
    size_t i = 2;
    bool hex = p[2] == 'x';
    if (hex)
        i++;
    size_t d = 0;
    while ((hex ? strchr("0123456789abcdefABCDEF", p[i]) : strchr("0123456789", p[i])) &&
           p[i] != '\0') {
        i++;
        d++;
    }
    return d > 0 && p[i] == ';' ? i + 1 : 0;
}

/* Returns NULL when doc is well-formed XML (after an optional <!DOCTYPE html>), else a static
 * message with the byte offset. */
static const char *xml_check(const char *doc)
{
    static char msg[256];
    char stack[128][32];
    int depth = 0, roots = 0;
    const char *p = doc;
#define BAD(...)                                                       \
 do {                                                                  \
  int o_ = snprintf(msg, sizeof msg, "offset %ld: ", (long)(p - doc)); \
  snprintf(msg + o_, sizeof msg - (size_t)o_, __VA_ARGS__);            \
  return msg;                                                          \
 } while (0)
    while (*p) {
        if (*p == '&') {
            size_t n = entity_len(p);
            if (n == 0)
                BAD("bad entity '%.10s'", p);
            p += n;
            continue;
        }
        if (*p != '<') {
            if (depth == 0 && !strchr(" \t\r\n", *p))
                BAD("text outside the root element");
            p++;
            continue;
        }
        if (strncmp(p, "<!--", 4) == 0) {
            const char *e = strstr(p, "-->");
            if (!e)
                BAD("unterminated comment");
            p = e + 3;
            continue;
        }
        if (strncmp(p, "<!DOCTYPE", 9) == 0) {
            if (depth != 0 || roots != 0)
                BAD("misplaced DOCTYPE");
            const char *e = strchr(p, '>');
            if (!e)
                BAD("unterminated DOCTYPE");
            p = e + 1;
            continue;
        }
        if (p[1] == '/') {
            const char *s = p + 2;
            size_t n = 0;
            while (name_char(s[n]))
                n++;
            if (n == 0 || s[n] != '>')
                BAD("bad end tag");
            if (depth == 0)
                BAD("end tag </%.*s> without a start tag", (int)n, s);
            depth--;
            if (strlen(stack[depth]) != n || strncmp(stack[depth], s, n) != 0)
                BAD("</%.*s> closes <%s>", (int)n, s, stack[depth]);
            p = s + n + 1;
            continue;
        }
        const char *s = p + 1;
        size_t n = 0;
        while (name_char(s[n]))
            n++;
        if (n == 0 || n >= sizeof stack[0])
            BAD("bad tag name");
        const char *q = s + n;
        for (;;) {
            while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
                q++;
            if (*q == '>' || (q[0] == '/' && q[1] == '>'))
                break;
            size_t an = 0;
            while (name_char(q[an]))
                an++;
            if (an == 0 || q[an] != '=' || (q[an + 1] != '"' && q[an + 1] != '\''))
                BAD("bad attribute in <%.*s>", (int)n, s);
            char quote = q[an + 1];
            q += an + 2;
            while (*q && *q != quote) {
                if (*q == '<')
                    BAD("'<' in an attribute value");
                if (*q == '&') {
                    size_t en = entity_len(q);
                    if (en == 0)
                        BAD("bad entity in an attribute value");
                    q += en;
                    continue;
                }
                q++;
            }
            if (*q != quote)
                BAD("unterminated attribute");
            q++;
            if (*q != ' ' && *q != '\n' && *q != '>' && *q != '/')
                BAD("no space between attributes");
        }
        bool self = *q == '/';
        if (depth == 0) {
            if (roots++ > 0)
                BAD("second root element");
        }
        if (!self) {
            if (depth == (int)(sizeof stack / sizeof stack[0]))
                BAD("nesting too deep");
            memcpy(stack[depth], s, n);
            stack[depth][n] = '\0';
            depth++;
        }
        p = q + (self ? 2 : 1);
        /* raw text elements: <style> holds CSS without '<' or '&' (checked as text) */
    }
    if (depth != 0) {
        snprintf(msg, sizeof msg, "unclosed <%s> at the end", stack[depth - 1]);
        return msg;
    }
    if (roots != 1)
        return "no root element";
    return NULL;
#undef BAD
}

/* ------------------------------------------------------------------ chart inspection */

typedef struct chart {
    char kind[32];
    bool nodata;
    size_t series, legend;
    const char *start, *end;
} chart;

static size_t charts(const char *html, chart *out, size_t max)
{
    size_t n = 0;
    for (const char *p = html; (p = strstr(p, "<svg ")) != NULL && n < max;) {
        const char *e = strstr(p, "</svg>");
        if (!e)
            break;
        chart *c = &out[n++];
        memset(c, 0, sizeof *c);
        c->start = p;
        c->end = e;
        const char *k = strstr(p, "data-chart=\"");
        if (k && k < e) {
            k += 12;
            size_t l = strcspn(k, "\"");
            snprintf(c->kind, sizeof c->kind, "%.*s", (int)(l < 31 ? l : 31), k);
        }
        c->nodata = strncmp(p, "<svg class=\"chart nodata\"", 25) == 0;
        for (const char *q = p; (q = strstr(q, "class=\"series s")) != NULL && q < e; q++)
            c->series++;
        for (const char *q = p; (q = strstr(q, "<text class=\"lg\"")) != NULL && q < e; q++)
            c->legend++;
        p = e + 6;
    }
    return n;
}

/* Chart i of the given kind (0-based among that kind), or NULL. */
static const chart *nth(const chart *c, size_t n, const char *kind, size_t i)
{
    for (size_t j = 0; j < n; j++)
        if (strcmp(c[j].kind, kind) == 0 && i-- == 0)
            return &c[j];
    return NULL;
}

static size_t kinds(const chart *c, size_t n, const char *kind)
{
    size_t k = 0;
    for (size_t j = 0; j < n; j++)
        k += strcmp(c[j].kind, kind) == 0;
    return k;
}

/* Whether a legend entry of chart c reads exactly `name` (escaped form). */
static bool has_legend(const chart *c, const char *name)
{
    char want[512];
    snprintf(want, sizeof want, ">%s</text>", name);
    for (const char *q = c->start; (q = strstr(q, "<text class=\"lg\"")) != NULL && q < c->end;
         q++) {
        const char *e = strstr(q, "</text>");
        const char *gt = strchr(q, '>');
        if (e && gt && strncmp(gt, want, strlen(want)) == 0)
            return true;
    }
    return false;
}

static void assert_no_external(const char *html)
{
    ASSERT(strstr(html, "<script") == NULL);
    ASSERT(strstr(html, "<link") == NULL);
    ASSERT(strstr(html, "<img") == NULL);
    static const char *const attrs[] = { " src=\"", " href=\"", " xlink:href=\"" };
    for (size_t a = 0; a < 3; a++) {
        for (const char *p = html; (p = strstr(p, attrs[a])) != NULL; p++) {
            const char *v = p + strlen(attrs[a]);
            size_t l = strcspn(v, "\"");
            char val[256];
            snprintf(val, sizeof val, "%.*s", (int)(l < 255 ? l : 255), v);
            if (strstr(val, "http") || strstr(val, "//") || strncmp(val, "#", 1) != 0)
                FAILF("external reference %s%s\"", attrs[a], val);
        }
    }
    ASSERT(strstr(html, "url(http") == NULL);
    ASSERT(strstr(html, "@import") == NULL);
}

static void assert_xml(const char *path, const char *html)
{
    const char *why = xml_check(html);
    if (why)
        FAILF("%s is not well-formed: %s", path, why);
    if (system("command -v xmllint >/dev/null 2>&1") == 0) {
        char cmd[1400];
        snprintf(cmd, sizeof cmd, "xmllint --noout '%s' 2>'%s'", path, err_path);
        int st = system(cmd);
        if (st != 0) {
            char *e = slurp(err_path);
            FAILF("xmllint rejects %s: %s", path, e ? e : "?");
        }
    }
}

/* ------------------------------------------------------------------ report tests */

static void test_report_all_fixtures(void)
{
    char html_path[800], args[6000];
    snprintf(html_path, sizeof html_path, "%s/all.html", tmp);
    snprintf(args, sizeof args, "bench report '%s' '%s' '%s' '%s' -o '%s'",
             fixture("bigann10k_hnsw.json"), fixture("bigann10k_ivf_flat.json"),
             fixture("remote_hnsw.json"), fixture("schema2_cases.json"), html_path);
    ASSERT_EQ(run_cli(args), 0);
    char *out = slurp(out_path);
    ASSERT(out != NULL);
    char want[900];
    snprintf(want, sizeof want, "%s\n", html_path);
    ASSERT(strcmp(out, want) == 0);
    free(out);
    char *html = slurp(html_path);
    ASSERT(html != NULL);
    assert_xml(html_path, html);
    assert_no_external(html);

    chart c[64];
    size_t n = charts(html, c, 64);
    /* recall vs QPS: BIGANN-10k at k=10 (two runs, their peers, the 2-thread runs), and the
     * schema-2 run's dataset; the remote run has no sweep */
    ASSERT_EQ(kinds(c, n, "recall-qps"), 2);
    const chart *rq = nth(c, n, "recall-qps", 0);
    ASSERT_EQ(rq->series, 8); /* hnsw, hnsw 2 thr, hnswlib, hnswlib 2 thr, faiss, faiss 2 thr,
                                 ivf_flat, faiss of ivf_flat */
    ASSERT_EQ(rq->legend, 8);
    ASSERT(has_legend(rq, "bigann10k_hnsw (hnsw)"));
    ASSERT(has_legend(rq, "bigann10k_hnsw (hnsw), 2 threads"));
    ASSERT(has_legend(rq, "bigann10k_ivf_flat (ivf_flat)"));
    ASSERT(has_legend(rq, "hnswlib (peer of bigann10k_hnsw (hnsw))"));
    ASSERT(has_legend(rq, "faiss (peer of bigann10k_hnsw (hnsw))"));
    ASSERT(has_legend(rq, "faiss (peer of bigann10k_ivf_flat (ivf_flat))"));
    ASSERT(strstr(rq->start, "recall@10 vs QPS: BIGANN-10k (10,000 \xc3\x97 128, L2)") != NULL);
    const chart *rq2 = nth(c, n, "recall-qps", 1);
    ASSERT_EQ(rq2->series, 2);
    ASSERT(has_legend(rq2, "schema2_cases (hnsw)"));
    ASSERT(has_legend(rq2, "hnswlib&lt;&amp;&gt; (peer)"));
    /* every line series has its markers */
    ASSERT(count(rq->start, "class=\"markers m") >= 8);

    /* concurrency: QPS over the remote run, the schema-2 run and its filter case; latency
     * percentiles per source */
    ASSERT_EQ(kinds(c, n, "conc-qps"), 1);
    const chart *cq = nth(c, n, "conc-qps", 0);
    ASSERT_EQ(cq->series, 3);
    ASSERT(has_legend(cq, "remote_hnsw (bigann)"));
    ASSERT(has_legend(cq, "schema2_cases (hnsw)"));
    ASSERT(has_legend(cq, "schema2_cases (hnsw) / filter-99p"));
    ASSERT_EQ(kinds(c, n, "conc-latency"), 3);
    for (size_t i = 0; i < 3; i++) {
        const chart *cl = nth(c, n, "conc-latency", i);
        ASSERT_EQ(cl->series, 3);
        ASSERT(has_legend(cl, "p50") && has_legend(cl, "p95") && has_legend(cl, "p99"));
    }
    /* streaming stages */
    ASSERT_EQ(kinds(c, n, "stream-recall"), 1);
    ASSERT_EQ(nth(c, n, "stream-recall", 0)->series, 1);
    ASSERT_EQ(kinds(c, n, "stream-latency"), 1);
    ASSERT_EQ(nth(c, n, "stream-latency", 0)->series, 3);
    /* build bars: insert, optimize, peer build */
    ASSERT_EQ(kinds(c, n, "build-time"), 1);
    const chart *bt = nth(c, n, "build-time", 0);
    ASSERT_EQ(bt->series, 3);
    ASSERT(has_legend(bt, "insert (insert_duration)"));
    ASSERT(has_legend(bt, "index build (optimize_duration)"));
    ASSERT(has_legend(bt, "peer build (add + train)"));
    /* 2 runs with peers (hnswlib+faiss, faiss) + 1 with one: 3 + 2 streaming/run bars */
    ASSERT(strstr(bt->start, "schema2_cases (hnsw) / streaming") != NULL);
    /* I/O profile: three runs have one, three charts each, read and write series */
    ASSERT_EQ(kinds(c, n, "io-bytes"), 3);
    ASSERT_EQ(kinds(c, n, "io-ops"), 3);
    ASSERT_EQ(kinds(c, n, "io-hist"), 3);
    for (size_t i = 0; i < 3; i++)
        ASSERT_EQ(nth(c, n, "io-hist", i)->series, 2);
    ASSERT_EQ(n, 2 + 1 + 3 + 2 + 1 + 9);
    for (size_t i = 0; i < n; i++) {
        ASSERT(!c[i].nodata);
        ASSERT_EQ(c[i].series, c[i].legend);
    }

    /* escaping: the dataset name and the peer name carry <&>"' */
    ASSERT(strstr(html, "gen &lt;&amp;&gt; &quot;clustered&quot; &#39;x&#39;") != NULL);
    ASSERT(strstr(html, "<&>") == NULL);
    ASSERT(strstr(html, "hnswlib<&") == NULL);
    ASSERT(count(html, "hnswlib&lt;&amp;&gt;") >= 3); /* legend, summary, details */
    /* sections and summary contents */
    ASSERT(strstr(html, "<h2 id=\"summary\">") != NULL);
    ASSERT(strstr(html, "<h3 id=\"cases\">") != NULL);
    ASSERT(strstr(html, "filter-99p") != NULL);
    ASSERT(strstr(html, "0.9871 @100") != NULL); /* VectorDBBench recall at the case's k */
    ASSERT(strstr(html, "avx512") != NULL || strstr(html, "avx2") != NULL);
    free(html);
}

static void test_report_single_and_empty_sections(void)
{
    char html_path[800], args[4000];
    /* one run with a sweep and concurrency lists but no I/O profile and no peers */
    snprintf(html_path, sizeof html_path, "%s/one.html", tmp);
    snprintf(args, sizeof args, "bench report '%s' --output='%s' --title 'A <b>&amp; title'",
             fixture("compare_a.json"), html_path);
    ASSERT_EQ(run_cli(args), 0);
    char *html = slurp(html_path);
    ASSERT(html != NULL);
    assert_xml(html_path, html);
    ASSERT(strstr(html, "<title>A &lt;b&gt;&amp;amp; title</title>") != NULL);
    chart c[16];
    size_t n = charts(html, c, 16);
    ASSERT_EQ(kinds(c, n, "recall-qps"), 1);
    ASSERT_EQ(nth(c, n, "recall-qps", 0)->series, 1);
    ASSERT(has_legend(nth(c, n, "recall-qps", 0), "compare_a (hnsw)"));
    ASSERT_EQ(nth(c, n, "conc-qps", 0)->series, 1);
    ASSERT_EQ(nth(c, n, "build-time", 0)->series, 2); /* no peers: insert + optimize */
    const chart *io = nth(c, n, "io-bytes", 0);
    ASSERT(io != NULL && io->nodata);
    ASSERT(strstr(io->start, "no run has an I/O profile") != NULL);
    free(html);

    /* the remote run alone: no sweep, no durations: placeholders, still valid */
    snprintf(html_path, sizeof html_path, "%s/remote.html", tmp);
    snprintf(args, sizeof args, "bench report '%s' -o '%s'", fixture("remote_hnsw.json"),
             html_path);
    ASSERT_EQ(run_cli(args), 0);
    html = slurp(html_path);
    ASSERT(html != NULL);
    assert_xml(html_path, html);
    assert_no_external(html);
    n = charts(html, c, 16);
    ASSERT(nth(c, n, "recall-qps", 0)->nodata);
    ASSERT(nth(c, n, "build-time", 0)->nodata);
    ASSERT(!nth(c, n, "conc-qps", 0)->nodata);
    ASSERT_EQ(nth(c, n, "conc-qps", 0)->series, 1);
    ASSERT(strstr(html, "http://127.0.0.1:19931") != NULL); /* the target, as text */
    free(html);

    /* default output: the first input with .html */
    char copy[800], cmd[2000];
    snprintf(copy, sizeof copy, "%s/run1.json", tmp);
    snprintf(cmd, sizeof cmd, "cp '%s' '%s'", fixture("compare_b.json"), copy);
    ASSERT_EQ(system(cmd), 0);
    snprintf(args, sizeof args, "bench report '%s'", copy);
    ASSERT_EQ(run_cli(args), 0);
    snprintf(html_path, sizeof html_path, "%s/run1.html", tmp);
    char *out = slurp(out_path);
    ASSERT(out && strncmp(out, html_path, strlen(html_path)) == 0);
    free(out);
    html = slurp(html_path);
    ASSERT(html != NULL);
    assert_xml(html_path, html);
    free(html);
}

static void test_report_real_schema2(void)
{
    char html_path[800], args[4000];
    snprintf(html_path, sizeof html_path, "%s/cases.html", tmp);
    snprintf(args, sizeof args, "bench report '%s' -o '%s'", fixture("bigann10k_cases.json"),
             html_path);
    ASSERT_EQ(run_cli(args), 0);
    char *html = slurp(html_path);
    ASSERT(html != NULL);
    assert_xml(html_path, html);
    assert_no_external(html);
    chart c[32];
    size_t n = charts(html, c, 32);
    ASSERT_EQ(kinds(c, n, "recall-qps"), 1);
    ASSERT_EQ(nth(c, n, "recall-qps", 0)->series, 1);
    /* the run (its performance case) and the two filter cases */
    const chart *cq = nth(c, n, "conc-qps", 0);
    ASSERT(cq != NULL);
    ASSERT_EQ(cq->series, 3);
    ASSERT(has_legend(cq, "bigann10k_cases (hnsw)"));
    ASSERT(has_legend(cq, "bigann10k_cases (hnsw) / filter-1p"));
    ASSERT(has_legend(cq, "bigann10k_cases (hnsw) / filter-99p"));
    ASSERT_EQ(kinds(c, n, "conc-latency"), 3);
    ASSERT_EQ(kinds(c, n, "stream-recall"), 1);
    ASSERT_EQ(kinds(c, n, "stream-latency"), 1);
    /* streaming has its own insert bar beside the run's */
    const chart *bt = nth(c, n, "build-time", 0);
    ASSERT(bt != NULL && !bt->nodata);
    ASSERT(strstr(bt->start, "bigann10k_cases (hnsw) / streaming") != NULL);
    ASSERT_EQ(kinds(c, n, "io-hist"), 1);
    for (size_t i = 0; i < n; i++)
        ASSERT_EQ(c[i].series, c[i].legend);
    free(html);
}

/* ------------------------------------------------------------------ compare tests */

/* The cells of the text row whose first column is `metric` (up to 8). */
static size_t row_cells(const char *text, const char *metric, char cells[][32], size_t max)
{
    size_t ml = strlen(metric);
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        if (strncmp(p, metric, ml) != 0 || p[ml] != ' ')
            continue;
        /* skip the metric name (which may contain a space before "(unit)") */
        const char *q = p + ml;
        if (strncmp(q, " (", 2) == 0)
            q = strchr(q, ')') + 1;
        size_t n = 0;
        while (*q && *q != '\n' && n < max) {
            while (*q == ' ')
                q++;
            if (*q == '\n' || !*q)
                break;
            size_t l = strcspn(q, " \n");
            /* "0.500 better" is one ratio cell: keep the verdict with its number */
            snprintf(cells[n], 32, "%.*s", (int)(l < 31 ? l : 31), q);
            q += l;
            if (n > 0 && (strncmp(q, " better", 7) == 0 || strncmp(q, " worse", 6) == 0 ||
                          strncmp(q, " same", 5) == 0)) {
                size_t vl = strcspn(q + 1, " \n");
                size_t cl = strlen(cells[n]);
                snprintf(cells[n] + cl, 32 - cl, " %.*s", (int)vl, q + 1);
                q += 1 + vl;
            }
            n++;
        }
        return n;
    }
    return 0;
}

static void
expect_row(const char *text, const char *metric, const char *a, const char *b, const char *ratio)
{
    char cells[8][32];
    size_t n = row_cells(text, metric, cells, 8);
    if (n != 3 || strcmp(cells[0], a) != 0 || strcmp(cells[1], b) != 0 ||
        strcmp(cells[2], ratio) != 0)
        FAILF("row %s: got %zu cells [%s | %s | %s], want [%s | %s | %s]", metric, n,
              n > 0 ? cells[0] : "", n > 1 ? cells[1] : "", n > 2 ? cells[2] : "", a, b, ratio);
}

/* The `make demo` result (Fashion-MNIST, HNSW, hnswlib and FAISS peers, 1 and 2 threads) as the
 * bench wrote it: the data set gets its name and shape (not the IDX file name), max QPS comes
 * from the 2-thread run and says so, the peer ratios are the console's interpolated ones (the
 * file's ratios.*.qps_ratio_at_recall_0.95), and the recall axis fits the data (the sweep spans
 * 0.907..0.9995: the axis starts well above 0.5). Layout in a real browser: report_browser.js. */
static void test_report_demo(void)
{
    char html_path[800], args[4000];
    snprintf(html_path, sizeof html_path, "%s/demo.html", tmp);
    snprintf(args, sizeof args, "bench report '%s' -o '%s'", fixture("fmnist_demo.json"),
             html_path);
    ASSERT_EQ(run_cli(args), 0);
    char *html = slurp(html_path);
    ASSERT(html != NULL);
    assert_xml(html_path, html);
    ASSERT(strstr(html, "<td class=\"t ds\">Fashion-MNIST (60,000 \xc3\x97 784, L2)</td>") != NULL);
    ASSERT(strstr(html, "train-images-idx3-ubyte.gz</td>") == NULL);
    /* max QPS: 26128.5 at ef=10 with 2 threads (the serial best is 15266.8) */
    ASSERT(strstr(html, "<td>26128.5<br/><small>ef=10, 2 threads</small></td>") != NULL);
    /* peer ratios as the console printed them (1.50, 4.24) */
    json_error_t je;
    json_t *root = json_load_file(fixture("fmnist_demo.json"), 0, &je);
    ASSERT(root != NULL);
    double rh = json_number_value(json_object_get(
        json_object_get(json_object_get(root, "ratios"), "hnswlib"), "qps_ratio_at_recall_0.95"));
    double rf = json_number_value(json_object_get(
        json_object_get(json_object_get(root, "ratios"), "faiss"), "qps_ratio_at_recall_0.95"));
    json_decref(root);
    char want[128];
    snprintf(want, sizeof want, "hnswlib %.2f\xc3\x97<br/>faiss %.2f\xc3\x97</td>", rh, rf);
    if (strstr(html, want) == NULL)
        FAILF("peer ratios \"%s\" not in the results table", want);
    ASSERT(strstr(html, "QPS ratio at recall 0.95") != NULL); /* labelled */
    snprintf(want, sizeof want, "<td>%.2f\xc3\x97</td>", rh); /* and the peers table */
    ASSERT(strstr(html, want) != NULL);
    /* the recall axis */
    chart c[32];
    size_t n = charts(html, c, 32);
    const chart *rq = nth(c, n, "recall-qps", 0);
    ASSERT(rq != NULL);
    const char *lo = strstr(rq->start, "data-x-lo=\"");
    const char *hi = strstr(rq->start, "data-x-hi=\"");
    ASSERT(lo != NULL && lo < rq->end && hi != NULL && hi < rq->end);
    double xlo = strtod(lo + 11, NULL), xhi = strtod(hi + 11, NULL);
    if (!(xlo > 0.8 && xlo < 0.907 && xhi >= 0.9995 && xhi <= 1.0))
        FAILF("recall axis %g..%g for recalls 0.907..0.9995", xlo, xhi);
    free(html);
}

static void test_compare_text(void)
{
    char args[4000];
    snprintf(args, sizeof args, "bench compare '%s' '%s'", fixture("compare_a.json"),
             fixture("compare_b.json"));
    ASSERT_EQ(run_cli(args), 0);
    char *t = slurp(out_path);
    ASSERT(t != NULL);
    ASSERT(strstr(t, "A = compare_a (hnsw)") != NULL);
    ASSERT(strstr(t, "B = compare_b (ivf_flat)") != NULL);
    ASSERT(strstr(t, "B/A") != NULL);
    expect_row(t, "insert_duration", "2.000", "1.000", "0.500 better");
    expect_row(t, "optimize_duration", "4.000", "5.000", "1.250 worse");
    expect_row(t, "load_duration", "6.000", "6.000", "1.000 same");
    expect_row(t, "recall", "0.9600", "0.9500", "0.990 worse");
    /* interpolated (as the bench console): A between 0.90 @ 1000 and 0.96 @ 800 = 833.3; B has a
     * run at exactly 0.95 */
    expect_row(t, "qps_at_recall_0.95", "833.3", "1600.0", "1.920 better");
    expect_row(t, "qps_max_serial", "1000.0", "1600.0", "1.600 better");
    expect_row(t, "serial_latency_p99", "2.500", "1.000", "0.400 better");
    expect_row(t, "memory", "100.0", "50.0", "0.500 better");
    expect_row(t, "qps", "2000.0", "3000.0", "1.500 better");
    expect_row(t, "conc_qps@1", "700.0", "1400.0", "2.000 better");
    expect_row(t, "conc_qps@4", "2000.0", "3000.0", "1.500 better");
    expect_row(t, "conc_latency_p99@1", "4.000", "2.000", "0.500 better");
    expect_row(t, "conc_latency_p99@4", "8.000", "10.000", "1.250 worse");
    /* columns line up: every table row has the same width up to the ratio column */
    free(t);
}

static json_t *metric_of(json_t *root, const char *name)
{
    json_t *ms = json_object_get(root, "metrics");
    for (size_t i = 0; i < json_array_size(ms); i++) {
        json_t *m = json_array_get(ms, i);
        if (strcmp(json_string_value(json_object_get(m, "metric")), name) == 0)
            return m;
    }
    return NULL;
}

static void
expect_json(json_t *root, const char *name, double a, double b, double ratio, const char *verdict)
{
    json_t *m = metric_of(root, name);
    if (!m)
        FAILF("metric %s missing from the JSON", name);
    json_t *v = json_object_get(m, "values"), *r = json_object_get(m, "ratios");
    json_t *vd = json_object_get(m, "verdicts");
    ASSERT_EQ(json_array_size(v), 2);
    ASSERT(json_is_null(json_array_get(r, 0)));
    double ga = json_number_value(json_array_get(v, 0)),
           gb = json_number_value(json_array_get(v, 1));
    double gr = json_number_value(json_array_get(r, 1));
    if (ga != a || gb != b || gr != ratio)
        FAILF("%s: values %.17g %.17g ratio %.17g, want %.17g %.17g %.17g", name, ga, gb, gr, a, b,
              ratio);
    ASSERT(strcmp(json_string_value(json_array_get(vd, 1)), verdict) == 0);
}

static void test_compare_json(void)
{
    char args[4000];
    snprintf(args, sizeof args, "bench compare --json '%s' '%s'", fixture("compare_a.json"),
             fixture("compare_b.json"));
    ASSERT_EQ(run_cli(args), 0);
    json_error_t je;
    json_t *root = json_load_file(out_path, 0, &je);
    if (!root)
        FAILF("compare --json output is not JSON: %s (line %d)", je.text, je.line);
    ASSERT_EQ(json_array_size(json_object_get(root, "runs")), 2);
    ASSERT(strcmp(json_string_value(
                      json_object_get(json_array_get(json_object_get(root, "runs"), 1), "label")),
                  "compare_b (ivf_flat)") == 0);
    expect_json(root, "insert_duration", 2.0, 1.0, 0.5, "better");
    expect_json(root, "optimize_duration", 4.0, 5.0, 1.25, "worse");
    expect_json(root, "load_duration", 6.0, 6.0, 1.0, "same");
    double qa = 1000.0 + (800.0 - 1000.0) * (0.95 - 0.9) / (0.96 - 0.9);
    expect_json(root, "qps_at_recall_0.95", qa, 1600, 1600 / qa, "better");
    expect_json(root, "memory", 104857600, 52428800, 0.5, "better");
    expect_json(root, "qps", 2000, 3000, 1.5, "better");
    expect_json(root, "conc_qps@1", 700, 1400, 2.0, "better");
    json_t *m = metric_of(root, "memory");
    ASSERT(strcmp(json_string_value(json_object_get(m, "unit")), "bytes") == 0);
    ASSERT(strcmp(json_string_value(json_object_get(m, "better")), "lower") == 0);
    json_decref(root);
}

static void test_compare_cases_and_peers(void)
{
    char args[4000];
    snprintf(args, sizeof args, "bench compare '%s' '%s' '%s' '%s'", fixture("schema2_cases.json"),
             fixture("bigann10k_hnsw.json"), fixture("remote_hnsw.json"),
             fixture("bigann10k_cases.json"));
    ASSERT_EQ(run_cli(args), 0);
    char *t = slurp(out_path);
    ASSERT(t != NULL);
    ASSERT(strstr(t, "C/A") != NULL && strstr(t, "D/A") != NULL);
    ASSERT(strstr(t, "filter-1p:qps") != NULL);
    ASSERT(strstr(t, "filter-99p:recall") != NULL);
    ASSERT(strstr(t, "streaming:max_stage_p99 (ms)") != NULL);
    ASSERT(strstr(t, "conc_qps@20") != NULL);
    ASSERT(strstr(t, "conc_qps@8") != NULL);
    free(t);
}

/* ------------------------------------------------------------------ errors */

static void expect_fail(const char *args, int code, const char *msg1, const char *msg2)
{
    int rc = run_cli(args);
    char *e = slurp(err_path);
    if (rc != code)
        FAILF("'%s' exited %d, want %d (stderr: %s)", args, rc, code, e ? e : "");
    if ((msg1 && (!e || !strstr(e, msg1))) || (msg2 && (!e || !strstr(e, msg2))))
        FAILF("'%s': stderr '%s' lacks '%s' / '%s'", args, e ? e : "", msg1 ? msg1 : "",
              msg2 ? msg2 : "");
    free(e);
}

static void test_errors(void)
{
    char args[4000], missing[800], corrupt[800], empty[800], nores[800], html[800];
    snprintf(missing, sizeof missing, "%s/nope.json", tmp);
    snprintf(corrupt, sizeof corrupt, "%s/corrupt.json", tmp);
    snprintf(empty, sizeof empty, "%s/empty.json", tmp);
    snprintf(nores, sizeof nores, "%s/nores.json", tmp);
    snprintf(html, sizeof html, "%s/err.html", tmp);
    write_file(corrupt, "{\n  \"runs\": [\n    {\"recall\": 0.9,, \"qps\": 1}\n  ]\n}\n");
    write_file(empty, "  \n");
    write_file(nores, "{\"tool\": \"something else\", \"rows\": []}\n");
    const char *sub[2] = { "report", "compare" };
    for (int s = 0; s < 2; s++) {
        const char *o = s == 0 ? " -o " : " ";
        const char *oo = s == 0 ? html : "";
        snprintf(args, sizeof args, "bench %s '%s' '%s'%s%s", sub[s], fixture("compare_a.json"),
                 missing, o, oo);
        expect_fail(args, 1, missing, "No such file");
        char want[900];
        snprintf(want, sizeof want, "%s:3:", corrupt);
        snprintf(args, sizeof args, "bench %s '%s'%s%s", sub[s], corrupt, o, oo);
        expect_fail(args, 1, want, "invalid JSON");
        snprintf(args, sizeof args, "bench %s '%s'%s%s", sub[s], empty, o, oo);
        expect_fail(args, 1, empty, "empty file");
        snprintf(args, sizeof args, "bench %s '%s'%s%s", sub[s], nores, o, oo);
        expect_fail(args, 1, nores, "no benchmark results");
        snprintf(args, sizeof args, "bench %s", sub[s]);
        expect_fail(args, 2, "no result files", NULL);
        snprintf(args, sizeof args, "bench %s --bogus '%s'", sub[s], fixture("compare_a.json"));
        expect_fail(args, 2, "--bogus", NULL);
        snprintf(args, sizeof args, "bench %s --help", sub[s]);
        ASSERT_EQ(run_cli(args), 0);
    }
    /* a failed report leaves no file behind */
    ASSERT(access(html, F_OK) != 0);
    snprintf(args, sizeof args, "bench report '%s' -o '%s/no/such/dir/r.html'",
             fixture("compare_a.json"), tmp);
    expect_fail(args, 1, "cannot create", NULL);
    snprintf(args, sizeof args, "bench report '%s' -o", fixture("compare_a.json"));
    expect_fail(args, 2, "-o", NULL);
}

int main(void)
{
    bin = getenv("SX_SEXTANT_BIN");
    const char *src = getenv("SX_SOURCE_DIR");
    if (!bin || !src) {
        fprintf(stderr, "skip: SX_SEXTANT_BIN / SX_SOURCE_DIR not set (run through ctest)\n");
        return 77;
    }
    snprintf(data_dir, sizeof data_dir, "%s/tests/e2e/data/bench", src);
    snprintf(tmp, sizeof tmp, "%s", test_tmpdir("bench_report"));
    snprintf(out_path, sizeof out_path, "%s/stdout.txt", tmp);
    snprintf(err_path, sizeof err_path, "%s/stderr.txt", tmp);
    RUN(test_report_all_fixtures);
    RUN(test_report_single_and_empty_sections);
    RUN(test_report_real_schema2);
    RUN(test_report_demo);
    RUN(test_compare_text);
    RUN(test_compare_json);
    RUN(test_compare_cases_and_peers);
    RUN(test_errors);
    return TEST_DONE();
}
