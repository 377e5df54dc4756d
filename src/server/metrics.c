/*
 * metrics.c: request counters, latency histograms and engine gauges, rendered in the Prometheus
 * text exposition format 0.0.4.
 *
 * Families (each HELP + TYPE once, its samples contiguous, as the format requires):
 *   sextant_up, sextant_build_info{version}
 *   sextant_http_requests_total{route,status,code}        counter
 *   sextant_http_request_duration_seconds{route}          histogram (fixed buckets)
 *   sextant_rows_inserted_total, sextant_rows_deleted_total, sextant_search_queries_total
 *   sextant_search_merged_batches_total, sextant_search_merged_requests_total   (merge.c)
 *   sextant_io_{read,write}_{bytes,ops}_total, sextant_io_fsyncs_total          (sx_io_stats_get)
 *   sextant_io_profile_{ops,bytes}_total{phase,backend,dir}                      counters
 *   sextant_io_profile_op_size_bytes{phase,backend,dir}  histogram (sx_io_profile_get)
 *   sextant_collection_{rows,segments,growing_rows,memory_bytes}{db,collection} gauges
 *   sextant_index_{indexed_rows,total_rows,progress_ratio,state}{db,collection,index_type} gauges
 *   sextant_memory_budget_{limit,used,peak}_bytes, sextant_memory_budget_refusals_total,
 *   sextant_memory_budget_bytes{kind}   the process's budget, shared by every database
 *
 * Cardinality. `route` is a path from the route table, a health path or "other" (http.c never
 * passes a raw URL), status and code come from small fixed sets, so the request table is
 * bounded; it still has a hard cap (MAX_SERIES) and requests past it are counted in
 * sextant_http_requests_dropped_series_total instead of growing memory.
 *
 * Threads. Request series live in a fixed table guarded by `mu` (one short critical section per
 * request, small beside the cost of an HTTP request); the row counters are relaxed atomics
 * (independent counters, no ordering with other memory needed). Rendering takes `mu` once to
 * copy the table, then reads the catalog through sx__cat_foreach without holding it.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "server/server.h"
#include "util/alloc.h"
#include "util/buf.h"
#include "util/err.h"

#define MAX_SERIES 2048
#define MAX_ROUTES 256
#define ROUTE_LEN  96
#define N_BUCKETS  16
#define RENDER_CAP ((size_t)256 << 20) /* hard cap of one exposition */

static const double bucket_le[N_BUCKETS] = { 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                             0.25,   0.5,   1,      2.5,   5,    10,    30,   60 };

typedef struct req_series {
    char route[ROUTE_LEN];
    int status;
    int code;
    uint64_t count;
} req_series;

typedef struct hist {
    char route[ROUTE_LEN];
    uint64_t buckets[N_BUCKETS]; /* non-cumulative; rendered cumulative */
    uint64_t count;
    double sum;
} hist;

struct sx__metrics {
    pthread_mutex_t mu;
    req_series series[MAX_SERIES]; /* guarded by: mu */
    size_t n_series;               /* guarded by: mu */
    hist hists[MAX_ROUTES];        /* guarded by: mu */
    size_t n_hists;                /* guarded by: mu */
    uint64_t dropped;              /* guarded by: mu */
    atomic_uint_fast64_t inserted; /* relaxed: independent counters */
    atomic_uint_fast64_t deleted;
    atomic_uint_fast64_t searched;
    int64_t started_ns; /* sx_clock_ns at sx__metrics_new: the server's uptime; immutable */
};

sx_status sx__metrics_new(sx__metrics **out)
{
    sx__metrics *m = sx__calloc(1, sizeof *m);
    if (!m)
        return sx__err(SX_ENOMEM, "metrics: out of memory");
    pthread_mutex_init(&m->mu, NULL);
    atomic_init(&m->inserted, 0);
    atomic_init(&m->deleted, 0);
    atomic_init(&m->searched, 0);
    m->started_ns = sx_clock_ns();
    *out = m;
    return SX_OK;
}

double sx__metrics_uptime_s(const sx__metrics *m)
{
    return (double)(sx_clock_ns() - m->started_ns) / 1e9;
}

void sx__metrics_free(sx__metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    sx__free(m);
}

void sx__metrics_request(sx__metrics *m, const char *route, int http_status, int code, double secs)
{
    if (!m)
        return;
    if (!route || !*route || strlen(route) >= ROUTE_LEN)
        route = "other";
    if (secs < 0)
        secs = 0;
    pthread_mutex_lock(&m->mu);
    size_t i;
    for (i = 0; i < m->n_series; i++) {
        req_series *r = &m->series[i];
        if (r->status == http_status && r->code == code && strcmp(r->route, route) == 0)
            break;
    }
    if (i == m->n_series && m->n_series < MAX_SERIES) {
        req_series *r = &m->series[m->n_series++];
        snprintf(r->route, sizeof r->route, "%s", route);
        r->status = http_status;
        r->code = code;
        r->count = 0;
    }
    if (i < m->n_series)
        m->series[i].count++;
    else
        m->dropped++;

    for (i = 0; i < m->n_hists; i++) {
        if (strcmp(m->hists[i].route, route) == 0)
            break;
    }
    if (i == m->n_hists && m->n_hists < MAX_ROUTES) {
        hist *h = &m->hists[m->n_hists++];
        memset(h, 0, sizeof *h);
        snprintf(h->route, sizeof h->route, "%s", route);
    }
    if (i < m->n_hists) {
        hist *h = &m->hists[i];
        size_t b = 0;
        while (b < N_BUCKETS && secs > bucket_le[b])
            b++;
        if (b < N_BUCKETS)
            h->buckets[b]++;
        h->count++;
        h->sum += secs;
    }
    pthread_mutex_unlock(&m->mu);
}

void sx__metrics_rows(sx__metrics *m, uint64_t inserted, uint64_t deleted, uint64_t searched_nq)
{
    if (!m)
        return;
    atomic_fetch_add_explicit(&m->inserted, inserted, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->deleted, deleted, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->searched, searched_nq, memory_order_relaxed);
}

/* ------------------------------------------------------------------ rendering */

typedef struct out {
    sx__wbuf w;
    bool too_big;
} out;

static void put(out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void put(out *o, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (o->w.len + (size_t)n > RENDER_CAP) {
        o->too_big = true;
        return;
    }
    if ((size_t)n < sizeof buf) {
        sx__wbuf_put(&o->w, buf, (size_t)n);
        return;
    }
    /* longer than the stack buffer (long label values): format again into the buffer */
    if (!sx__wbuf_reserve(&o->w, (size_t)n + 1))
        return;
    va_start(ap, fmt);
    (void)vsnprintf((char *)o->w.data + o->w.len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    o->w.len += (size_t)n;
}

/* Escapes a label value (\\, \", \n) into buf. */
static const char *esc(const char *s, char *buf, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 3 < cap; s++) {
        if (*s == '\\' || *s == '"') {
            buf[n++] = '\\';
            buf[n++] = *s;
        } else if (*s == '\n') {
            buf[n++] = '\\';
            buf[n++] = 'n';
        } else {
            buf[n++] = *s;
        }
    }
    buf[n] = 0;
    return buf;
}

static void family(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void scalar(out *o, const char *name, const char *type, const char *help, uint64_t v)
{
    family(o, name, type, help);
    put(o, "%s %llu\n", name, (unsigned long long)v);
}

typedef struct coll_stat {
    char db[SX_MAX_NAME + 1];
    char name[SX_MAX_NAME + 1];
    sx_collection_info ci;
    bool has_ci;
    sx_index_info ii;
    bool has_index;
} coll_stat;

typedef struct coll_list {
    coll_stat *v;
    size_t n;
    size_t cap;
    bool oom;
} coll_list;

static int visit(void *ctx, const char *db, const sx__coll_meta *meta, sx_collection *h)
{
    coll_list *l = ctx;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        coll_stat *nv = sx__realloc(l->v, cap * sizeof *nv);
        if (!nv) {
            l->oom = true;
            return 1;
        }
        l->v = nv;
        l->cap = cap;
    }
    coll_stat *c = &l->v[l->n++];
    memset(c, 0, sizeof *c);
    snprintf(c->db, sizeof c->db, "%s", db ? db : "default");
    snprintf(c->name, sizeof c->name, "%s", meta ? meta->name : "");
    if (h) {
        c->has_ci = sx_collection_describe(h, &c->ci) == SX_OK;
        c->has_index = sx_index_describe(h, &c->ii) == SX_OK && c->ii.state != SX_INDEX_NONE;
    }
    return 0;
}

typedef enum coll_field {
    CF_ROWS,
    CF_SEGMENTS,
    CF_GROWING,
    CF_MEMORY,
    IF_INDEXED,
    IF_TOTAL,
    IF_PROGRESS,
    IF_STATE
} coll_field;

static void
coll_family(out *o, const coll_list *l, const char *name, const char *help, coll_field f)
{
    bool is_index = f >= IF_INDEXED;
    family(o, name, "gauge", help);
    char e1[2 * SX_MAX_NAME + 4], e2[2 * SX_MAX_NAME + 4], e3[80];
    for (size_t i = 0; i < l->n; i++) {
        const coll_stat *c = &l->v[i];
        if (is_index ? !c->has_index : !c->has_ci)
            continue;
        esc(c->db, e1, sizeof e1);
        esc(c->name, e2, sizeof e2);
        if (!is_index) {
            uint64_t v = f == CF_ROWS       ? c->ci.n_rows
                         : f == CF_SEGMENTS ? c->ci.n_segments
                         : f == CF_GROWING  ? c->ci.growing_rows
                                            : c->ci.memory_bytes;
            put(o, "%s{db=\"%s\",collection=\"%s\"} %llu\n", name, e1, e2, (unsigned long long)v);
            continue;
        }
        esc(c->ii.type, e3, sizeof e3);
        if (f == IF_PROGRESS) {
            double r =
                c->ii.total_rows == 0 ? 1.0 : (double)c->ii.indexed_rows / (double)c->ii.total_rows;
            put(o, "%s{db=\"%s\",collection=\"%s\",index_type=\"%s\"} %.6g\n", name, e1, e2, e3, r);
            continue;
        }
        uint64_t v = f == IF_INDEXED ? c->ii.indexed_rows
                     : f == IF_TOTAL ? c->ii.total_rows
                                     : (uint64_t)c->ii.state;
        put(o, "%s{db=\"%s\",collection=\"%s\",index_type=\"%s\"} %llu\n", name, e1, e2, e3,
            (unsigned long long)v);
    }
}

/* The I/O profile: every phase x backend x direction, always (16 fixed series per family, so a
 * rate() has a series from the start). The histogram's buckets are the profile's power-of-two
 * size buckets made cumulative; its _count is the bucket total (not read_ops, which a relaxed
 * snapshot may show one operation ahead) so +Inf always equals _count, and _sum is the bytes. */
/* The process's memory budget (docs/internals/MEMORY.md): limit 0 means unlimited. */
static void memory_budget(out *o, sx__catalog *cat)
{
    sx_memory_stats m;
    sx__cat_memory_stats(cat, &m);
    scalar(o, "sextant_memory_budget_limit_bytes", "gauge",
           "The memory budget of the process (0: unlimited, counted only).", m.limit_bytes);
    scalar(o, "sextant_memory_budget_used_bytes", "gauge", "Bytes charged to the memory budget.",
           m.used_bytes);
    scalar(o, "sextant_memory_budget_peak_bytes", "gauge",
           "Highest bytes charged to the memory budget since start.", m.peak_bytes);
    scalar(o, "sextant_memory_budget_refusals_total", "counter",
           "Charges the memory budget refused (the request got an out-of-memory error, a write "
           "sealed its growing segment first).",
           m.refusals);

    const struct {
        const char *kind;
        uint64_t v;
    } k[] = { { "growing", m.growing_bytes }, { "sealed", m.sealed_bytes },
              { "pkmap", m.pkmap_bytes },     { "index", m.index_bytes },
              { "build", m.build_bytes },     { "cache", m.cache_bytes },
              { "import", m.import_bytes },   { "scratch", m.scratch_bytes } };

    family(o, "sextant_memory_budget_bytes", "gauge",
           "Bytes charged to the memory budget, by kind.");
    for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
        put(o, "sextant_memory_budget_bytes{kind=\"%s\"} %llu\n", k[i].kind,
            (unsigned long long)k[i].v);
}

static void io_profile(out *o)
{
    static const char *const phase[SX_IO_PHASES] = { "other", "insert", "build", "query" };
    static const char *const backend[SX_IO_BACKENDS] = { "local", "s3" };
    static const char *const dir[2] = { "read", "write" };
    sx_io_profile p;
    memset(&p, 0, sizeof p);
    sx_io_profile_get(&p);
    const char *const name[2] = { "sextant_io_profile_ops_total",
                                  "sextant_io_profile_bytes_total" };
    const char *const help[2] = {
        "I/O operations by engine phase (insert: inserts, deletes, flushes; build: index builds; "
        "query: searches, queries, gets; other), backend (local files, s3 object store) and "
        "direction.",
        "Bytes read and written by engine phase, backend and direction."
    };
    for (int f = 0; f < 2; f++) {
        family(o, name[f], "counter", help[f]);
        for (int ph = 0; ph < SX_IO_PHASES; ph++)
            for (int be = 0; be < SX_IO_BACKENDS; be++)
                for (int d = 0; d < 2; d++) {
                    const sx_io_counter *c = &p.c[ph][be];
                    uint64_t v = f == 0 ? (d ? c->write_ops : c->read_ops)
                                        : (d ? c->write_bytes : c->read_bytes);
                    put(o, "%s{phase=\"%s\",backend=\"%s\",dir=\"%s\"} %llu\n", name[f], phase[ph],
                        backend[be], dir[d], (unsigned long long)v);
                }
    }
    const char *h = "sextant_io_profile_op_size_bytes";
    family(o, h, "histogram",
           "Size of single I/O operations (bytes) by engine phase, backend and direction.");
    for (int ph = 0; ph < SX_IO_PHASES; ph++)
        for (int be = 0; be < SX_IO_BACKENDS; be++)
            for (int d = 0; d < 2; d++) {
                const sx_io_counter *c = &p.c[ph][be];
                const uint64_t *hb = d ? c->write_hist : c->read_hist;
                uint64_t cum = 0;
                for (int i = 0; i < SX_IO_SIZE_BUCKETS - 1; i++) {
                    cum += hb[i];
                    put(o,
                        "%s_bucket{phase=\"%s\",backend=\"%s\",dir=\"%s\",le=\"%llu\"} "
                        "%llu\n",
                        h, phase[ph], backend[be], dir[d], 4096ULL << i, (unsigned long long)cum);
                }
                cum += hb[SX_IO_SIZE_BUCKETS - 1];
                put(o, "%s_bucket{phase=\"%s\",backend=\"%s\",dir=\"%s\",le=\"+Inf\"} %llu\n", h,
                    phase[ph], backend[be], dir[d], (unsigned long long)cum);
                put(o, "%s_sum{phase=\"%s\",backend=\"%s\",dir=\"%s\"} %llu\n", h, phase[ph],
                    backend[be], dir[d], (unsigned long long)(d ? c->write_bytes : c->read_bytes));
                put(o, "%s_count{phase=\"%s\",backend=\"%s\",dir=\"%s\"} %llu\n", h, phase[ph],
                    backend[be], dir[d], (unsigned long long)cum);
            }
}

sx_status
sx__metrics_render(sx__metrics *m, sx__catalog *cat, sx__merger *mg, char **text, size_t *len)
{
    if (!m || !text || !len)
        return sx__err(SX_EINVAL, "metrics: no metrics");
    out o;
    memset(&o, 0, sizeof o);
    sx__wbuf_init(&o.w);
    char e1[2 * ROUTE_LEN + 4];

    scalar(&o, "sextant_up", "gauge", "1 while the server is running.", 1);
    family(&o, "sextant_build_info", "gauge", "Build information; the value is always 1.");
    put(&o, "sextant_build_info{version=\"%s\"} 1\n", esc(sx_version(), e1, sizeof e1));

    /* request table: copied under the lock, rendered outside it */
    req_series *series = sx__malloc(MAX_SERIES * sizeof *series);
    hist *hists = sx__malloc(MAX_ROUTES * sizeof *hists);
    if (!series || !hists) {
        sx__free(series);
        sx__free(hists);
        sx__wbuf_fini(&o.w);
        return sx__err(SX_ENOMEM, "metrics: out of memory");
    }
    pthread_mutex_lock(&m->mu);
    size_t n_series = m->n_series, n_hists = m->n_hists;
    uint64_t dropped = m->dropped;
    memcpy(series, m->series, n_series * sizeof *series);
    memcpy(hists, m->hists, n_hists * sizeof *hists);
    pthread_mutex_unlock(&m->mu);

    family(&o, "sextant_http_requests_total", "counter",
           "HTTP requests by route, HTTP status and Milvus code.");
    for (size_t i = 0; i < n_series; i++)
        put(&o, "sextant_http_requests_total{route=\"%s\",status=\"%d\",code=\"%d\"} %llu\n",
            esc(series[i].route, e1, sizeof e1), series[i].status, series[i].code,
            (unsigned long long)series[i].count);
    scalar(&o, "sextant_http_requests_dropped_series_total", "counter",
           "Requests not counted by route because the series table was full.", dropped);
    family(&o, "sextant_http_request_duration_seconds", "histogram",
           "HTTP request latency by route, from the first header to the queued response.");
    for (size_t i = 0; i < n_hists; i++) {
        const hist *h = &hists[i];
        esc(h->route, e1, sizeof e1);
        uint64_t cum = 0;
        for (size_t b = 0; b < N_BUCKETS; b++) {
            cum += h->buckets[b];
            put(&o, "sextant_http_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                e1, bucket_le[b], (unsigned long long)cum);
        }
        put(&o, "sextant_http_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n", e1,
            (unsigned long long)h->count);
        put(&o, "sextant_http_request_duration_seconds_sum{route=\"%s\"} %.9g\n", e1, h->sum);
        put(&o, "sextant_http_request_duration_seconds_count{route=\"%s\"} %llu\n", e1,
            (unsigned long long)h->count);
    }
    sx__free(series);
    sx__free(hists);

    scalar(&o, "sextant_rows_inserted_total", "counter", "Rows accepted by insert and upsert.",
           (uint64_t)atomic_load_explicit(&m->inserted, memory_order_relaxed));
    scalar(&o, "sextant_rows_deleted_total", "counter", "Rows deleted.",
           (uint64_t)atomic_load_explicit(&m->deleted, memory_order_relaxed));
    scalar(&o, "sextant_search_queries_total", "counter", "Search query vectors (nq summed).",
           (uint64_t)atomic_load_explicit(&m->searched, memory_order_relaxed));
    uint64_t batches = 0, merged = 0;
    if (mg)
        sx__merger_stats(mg, &batches, &merged);
    scalar(&o, "sextant_search_merged_batches_total", "counter",
           "Engine searches run by the search merger (each answers one or more requests; "
           "requests/batches is the mean batch size).",
           batches);
    scalar(&o, "sextant_search_merged_requests_total", "counter",
           "Search requests answered through the search merger.", merged);

    sx_io_stats io;
    memset(&io, 0, sizeof io);
    sx_io_stats_get(&io);
    scalar(&o, "sextant_io_read_bytes_total", "counter", "Bytes read by the engine.",
           io.read_bytes);
    scalar(&o, "sextant_io_write_bytes_total", "counter", "Bytes written by the engine.",
           io.write_bytes);
    scalar(&o, "sextant_io_read_ops_total", "counter", "Read calls made by the engine.",
           io.read_ops);
    scalar(&o, "sextant_io_write_ops_total", "counter", "Write calls made by the engine.",
           io.write_ops);
    scalar(&o, "sextant_io_fsyncs_total", "counter", "fsync/fdatasync calls made by the engine.",
           io.fsyncs);
    io_profile(&o);
    if (cat) {
        memory_budget(&o, cat);
        scalar(&o, "sextant_index_remote_builds_total", "counter",
               "Segment indexes built by index workers (cluster mode) and published here.",
               sx__cat_remote_builds(cat));
    }

    coll_list l;
    memset(&l, 0, sizeof l);
    if (cat) {
        sx_status st = sx__cat_foreach(cat, visit, &l);
        if (st != SX_OK || l.oom) {
            sx__free(l.v);
            sx__wbuf_fini(&o.w);
            return l.oom ? sx__err(SX_ENOMEM, "metrics: out of memory") : st;
        }
    }
    coll_family(&o, &l, "sextant_collection_rows", "Live rows of a collection.", CF_ROWS);
    coll_family(&o, &l, "sextant_collection_segments", "Sealed segments of a collection.",
                CF_SEGMENTS);
    coll_family(&o, &l, "sextant_collection_growing_rows", "Rows in the in-memory growing segment.",
                CF_GROWING);
    coll_family(&o, &l, "sextant_collection_memory_bytes",
                "Bytes of vectors, scalars and indexes held in memory.", CF_MEMORY);
    coll_family(&o, &l, "sextant_index_indexed_rows", "Rows in segments whose index is built.",
                IF_INDEXED);
    coll_family(&o, &l, "sextant_index_total_rows", "Rows stored (sealed and growing).", IF_TOTAL);
    coll_family(&o, &l, "sextant_index_progress_ratio",
                "indexed_rows / total_rows (1 when the collection is empty).", IF_PROGRESS);
    coll_family(&o, &l, "sextant_index_state",
                "Index state: 0 none, 1 in progress, 2 finished, 3 failed.", IF_STATE);
    sx__free(l.v);

    if (o.too_big) {
        sx__wbuf_fini(&o.w);
        return sx__err(SX_ENOMEM, "metrics: exposition larger than %zu bytes", RENDER_CAP);
    }
    sx__wbuf_put(&o.w, "", 1); /* NUL terminator, not counted */
    if (!sx__wbuf_ok(&o.w)) {
        sx__wbuf_fini(&o.w);
        return sx__err(SX_ENOMEM, "metrics: out of memory");
    }
    *len = o.w.len - 1;
    *text = (char *)o.w.data;
    return SX_OK;
}
