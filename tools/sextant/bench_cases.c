/*
 * bench_cases.c: concurrency levels and the streaming case of `sextant bench` (interface and
 * threading model in bench_cases.h).
 *
 * Latency logs. Worker w owns logs[0..n_logs): one for a level, one per stage when streaming.
 * A log is a table of LOG_MAX_CHUNKS chunk pointers, each chunk LOG_CHUNK floats (ms), allocated
 * on first use and never moved. log_push writes the value (and a new chunk's pointer) with plain
 * stores, then publishes count + 1 with memory_order_release; a reader acquire-loads the count
 * and copies entries below it. Entries are never rewritten, so the reporter can read while the
 * worker appends. Failure counts and recall sums are plain worker-private fields read only
 * after pthread_join (which orders them).
 *
 * Level protocol (VectorDBBench's concurrency test, Milvus Go benchmark output): all workers
 * start at t0 and stop issuing searches at t0 + duration; QPS = requests / (last worker's end -
 * t0). A reporter thread prints the cumulative block every interval (condition variable on
 * CLOCK_MONOTONIC; the end of the level wakes it at once).
 *
 * Streaming protocol (VectorDBBench StreamingPerformanceCase, simplified): the caller's thread
 * inserts batches paced to `rate` rows/s (batch b is issued no earlier than t0 + rows_before_b /
 * rate; when the engine is slower the insert simply runs behind, and the achieved rate is
 * reported). When the rows acknowledged reach rows_s = n * s / S, stage s is complete: the
 * current stage becomes s. Workers start at stage 1 and tag each search with the stage current
 * when it started; stage s's window lasts until stage s + 1 completes (the last stage: `final_s`
 * seconds after the last row). Each search is scored against the ground truth of rows_s, the
 * rows certainly visible when it started (rows inserted meanwhile that are closer count as hits
 * under the distance threshold).
 *
 * Rejected: one shared latency vector under a mutex (contention at high QPS distorts the
 * latencies being measured); separate processes per client as VectorDBBench spawns (Python's
 * GIL is the reason there; threads of one C process do not share a lock on the search path).
 */
#include "bench_cases.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_metrics.h"
#include "bench_print.h"
#include "cli.h"

#define LOG_CHUNK      65536u
#define LOG_MAX_CHUNKS 4096u
#define MAX_STAGES     100u
#define ERRMSG         512

typedef struct lat_log {
    float **chunks; /* LOG_MAX_CHUNKS slots, owned */
    _Atomic size_t n;
} lat_log;

struct runner;

typedef struct wstate {
    struct runner *r;
    size_t next_q;
    lat_log *logs;   /* n_logs */
    uint64_t *fails; /* n_logs, worker-private */
    double *rsum;    /* n_logs */
    uint64_t *rn;    /* n_logs */
    double t_end;
    int64_t *ids;
    float *dists;
} wstate;

typedef struct runner {
    bc_search_fn search;
    bc_score_fn score;
    void *ctx;
    size_t nq, k;
    unsigned conc, n_logs;
    bool streaming;
    double t_start, t_deadline; /* deadline 0: until stop */
    double interval_s;
    atomic_bool stop;       /* relaxed: only ends the loops */
    atomic_uint stage;      /* relaxed: the stage tag of the next search */
    atomic_bool fail_shown; /* first failure printed once */
    wstate *w;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done; /* guarded by: mu */
    double *scratch;
    size_t scratch_cap;
} runner;

/* ------------------------------------------------------------------ latency logs */

static int log_init(lat_log *l)
{
    l->chunks = calloc(LOG_MAX_CHUNKS, sizeof *l->chunks);
    atomic_init(&l->n, 0);
    return l->chunks != NULL ? 0 : -1;
}

static void log_free(lat_log *l)
{
    if (l->chunks != NULL) {
        for (size_t c = 0; c < LOG_MAX_CHUNKS && l->chunks[c] != NULL; c++)
            free(l->chunks[c]);
    }
    free(l->chunks);
    l->chunks = NULL;
}

/* Appends one latency (the owning worker only). A full or unallocatable log drops it. */
static void log_push(lat_log *l, float ms)
{
    size_t n = atomic_load_explicit(&l->n, memory_order_relaxed);
    size_t c = n / LOG_CHUNK;
    if (c >= LOG_MAX_CHUNKS)
        return;
    if (l->chunks[c] == NULL) {
        l->chunks[c] = malloc(LOG_CHUNK * sizeof(float));
        if (l->chunks[c] == NULL)
            return;
    }
    l->chunks[c][n % LOG_CHUNK] = ms;
    atomic_store_explicit(&l->n, n + 1, memory_order_release);
}

/* Copies log li of every worker into r->scratch (as doubles); returns the count or SIZE_MAX on
 * out of memory. */
static size_t gather(runner *r, unsigned li)
{
    size_t counts[1024], total = 0;
    unsigned nw = r->conc < 1024 ? r->conc : 1024;
    for (unsigned t = 0; t < nw; t++) {
        counts[t] = atomic_load_explicit(&r->w[t].logs[li].n, memory_order_acquire);
        total += counts[t];
    }
    if (total > r->scratch_cap) {
        size_t cap = r->scratch_cap ? r->scratch_cap : 65536;
        while (cap < total)
            cap *= 2;
        double *p = realloc(r->scratch, cap * sizeof *p);
        if (p == NULL)
            return SIZE_MAX;
        r->scratch = p;
        r->scratch_cap = cap;
    }
    size_t k = 0;
    for (unsigned t = 0; t < nw; t++) {
        lat_log *l = &r->w[t].logs[li];
        for (size_t i = 0; i < counts[t]; i++)
            r->scratch[k++] = (double)l->chunks[i / LOG_CHUNK][i % LOG_CHUNK];
    }
    return k;
}

/* Latency statistics of log li (sorted copy in scratch). */
static int stats_of(runner *r, unsigned li, bc_stats *s)
{
    size_t n = gather(r, li);
    if (n == SIZE_MAX)
        return -1;
    bm_sort(r->scratch, n);
    s->requests = n;
    s->avg_ms = bm_mean(r->scratch, n);
    s->min_ms = n ? r->scratch[0] : (double)NAN;
    s->max_ms = n ? r->scratch[n - 1] : (double)NAN;
    s->p50_ms = bm_percentile(r->scratch, n, 0.50);
    s->p95_ms = bm_percentile(r->scratch, n, 0.95);
    s->p99_ms = bm_percentile(r->scratch, n, 0.99);
    return 0;
}

/* ------------------------------------------------------------------ workers */

static void *worker_main(void *arg)
{
    wstate *w = arg;
    runner *r = w->r;
    char err[ERRMSG];
    for (;;) {
        double t0 = cli_now();
        if (atomic_load_explicit(&r->stop, memory_order_relaxed) ||
            (r->t_deadline > 0 && t0 >= r->t_deadline))
            break;
        unsigned stage = atomic_load_explicit(&r->stage, memory_order_relaxed);
        unsigned li = r->streaming ? (stage > 0 ? stage - 1 : 0) : 0;
        size_t q = w->next_q;
        w->next_q = (q + 1) % r->nq;
        size_t n = 0;
        int rc = r->search(r->ctx, q, w->ids, w->dists, &n, err, sizeof err);
        double t1 = cli_now();
        if (rc != 0) {
            w->fails[li]++;
            if (!atomic_exchange(&r->fail_shown, true))
                fprintf(stderr, "sextant bench: first failed search (concurrency %u): %s\n",
                        r->conc, err);
        } else if (r->score != NULL) {
            double rec = r->score(r->ctx, stage, q, w->ids, w->dists, n);
            if (!isnan(rec)) {
                w->rsum[li] += rec;
                w->rn[li]++;
            }
        }
        log_push(&w->logs[li], (float)((t1 - t0) * 1e3));
        w->t_end = t1;
    }
    return NULL;
}

static void runner_free(runner *r)
{
    if (r->w != NULL) {
        for (unsigned t = 0; t < r->conc; t++) {
            wstate *w = &r->w[t];
            if (w->logs != NULL) {
                for (unsigned l = 0; l < r->n_logs; l++)
                    log_free(&w->logs[l]);
            }
            free(w->logs);
            free(w->fails);
            free(w->rsum);
            free(w->rn);
            free(w->ids);
            free(w->dists);
        }
    }
    free(r->w);
    free(r->scratch);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv);
}

static int runner_init(runner *r, unsigned conc, unsigned n_logs, size_t nq, size_t k)
{
    memset(r, 0, sizeof *r);
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv, NULL);
    atomic_init(&r->stop, false);
    atomic_init(&r->stage, 0);
    atomic_init(&r->fail_shown, false);
    r->conc = conc;
    r->n_logs = n_logs;
    r->nq = nq;
    r->k = k;
    r->w = calloc(conc, sizeof *r->w);
    if (r->w == NULL)
        return -1;
    for (unsigned t = 0; t < conc; t++) {
        wstate *w = &r->w[t];
        w->r = r;
        w->next_q = (size_t)((uint64_t)t * nq / conc);
        w->logs = calloc(n_logs, sizeof *w->logs);
        w->fails = calloc(n_logs, sizeof *w->fails);
        w->rsum = calloc(n_logs, sizeof *w->rsum);
        w->rn = calloc(n_logs, sizeof *w->rn);
        w->ids = malloc((k ? k : 1) * sizeof *w->ids);
        w->dists = malloc((k ? k : 1) * sizeof *w->dists);
        if (w->logs == NULL || w->fails == NULL || w->rsum == NULL || w->rn == NULL ||
            w->ids == NULL || w->dists == NULL)
            return -1;
        for (unsigned l = 0; l < n_logs; l++) {
            if (log_init(&w->logs[l]) != 0)
                return -1;
        }
    }
    return 0;
}

/* Starts conc workers; on failure stops and joins the started ones. */
static int start_workers(runner *r, pthread_t *th, char *err, size_t err_len)
{
    for (unsigned t = 0; t < r->conc; t++) {
        if (pthread_create(&th[t], NULL, worker_main, &r->w[t]) != 0) {
            atomic_store(&r->stop, true);
            for (unsigned j = 0; j < t; j++)
                pthread_join(th[j], NULL);
            snprintf(err, err_len, "cannot start search thread %u of %u", t + 1, r->conc);
            return -1;
        }
    }
    return 0;
}

/* Sums the worker-private counters of log li (after join). */
static void sum_counters(const runner *r, unsigned li, uint64_t *fails, double *recall)
{
    double rs = 0;
    uint64_t rn = 0, f = 0;
    for (unsigned t = 0; t < r->conc; t++) {
        f += r->w[t].fails[li];
        rs += r->w[t].rsum[li];
        rn += r->w[t].rn[li];
    }
    *fails = f;
    *recall = rn ? rs / (double)rn : (double)NAN;
}

/* ------------------------------------------------------------------ levels */

static void abs_deadline(double mono_t, struct timespec *ts)
{
    double s = floor(mono_t);
    ts->tv_sec = (time_t)s;
    ts->tv_nsec = (long)((mono_t - s) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *reporter_main(void *arg)
{
    runner *r = arg;
    double tick = r->t_start + r->interval_s;
    pthread_mutex_lock(&r->mu);
    for (;;) {
        struct timespec ts;
        abs_deadline(tick, &ts);
        while (!r->done) {
            if (pthread_cond_timedwait(&r->cv, &r->mu, &ts) == ETIMEDOUT)
                break;
        }
        if (r->done)
            break;
        if (cli_now() < tick)
            continue;
        pthread_mutex_unlock(&r->mu);
        bc_stats s;
        memset(&s, 0, sizeof s);
        if (tick < r->t_deadline && stats_of(r, 0, &s) == 0) {
            /* failures are worker-private until join: the running block shows 0, the final
             * block the real count */
            bp_block(s.requests, 0, s.requests ? s.avg_ms : 0.0, s.requests ? s.min_ms : 0.0,
                     s.requests ? s.max_ms : 0.0, s.requests ? s.p50_ms : 0.0,
                     cli_now() - r->t_start);
        }
        double now = cli_now();
        while (tick <= now)
            tick += r->interval_s;
        pthread_mutex_lock(&r->mu);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

int bc_run_level(const bc_level_spec *spec, bc_stats *out, char *err, size_t err_len)
{
    runner r;
    memset(out, 0, sizeof *out);
    if (spec->conc == 0 || spec->conc > 1024 || spec->nq == 0) {
        snprintf(err, err_len, "concurrency must be 1..1024 and queries at least 1");
        return -1;
    }
    pthread_t *th = calloc(spec->conc, sizeof *th);
    int rc = -1;
    if (th == NULL || runner_init(&r, spec->conc, 1, spec->nq, spec->k) != 0) {
        snprintf(err, err_len, "out of memory for %u search threads", spec->conc);
        if (th != NULL)
            runner_free(&r);
        free(th);
        return -1;
    }
    r.search = spec->search;
    r.score = spec->score;
    r.ctx = spec->ctx;
    r.interval_s = spec->interval_s > 0 ? spec->interval_s : 5.0;
    char ts[48];
    bp_stamp(ts, sizeof ts);
    printf("[%s] concurrency %u: %.0f s, top-%zu, embedded\n", ts, spec->conc, spec->duration_s,
           spec->k);
    (void)fflush(stdout);
    r.t_start = cli_now();
    r.t_deadline = r.t_start + spec->duration_s;
    if (start_workers(&r, th, err, err_len) != 0)
        goto out;
    pthread_t rep;
    bool rep_ok = pthread_create(&rep, NULL, reporter_main, &r) == 0;
    for (unsigned t = 0; t < spec->conc; t++)
        pthread_join(th[t], NULL);
    pthread_mutex_lock(&r.mu);
    r.done = true;
    pthread_cond_broadcast(&r.cv);
    pthread_mutex_unlock(&r.mu);
    if (rep_ok)
        pthread_join(rep, NULL);
    double end = r.t_start;
    for (unsigned t = 0; t < spec->conc; t++)
        end = r.w[t].t_end > end ? r.w[t].t_end : end;
    if (stats_of(&r, 0, out) != 0) {
        snprintf(err, err_len, "out of memory collecting latencies");
        goto out;
    }
    sum_counters(&r, 0, &out->failures, &out->recall);
    out->elapsed_s = end - r.t_start;
    out->qps = out->elapsed_s > 0 ? (double)out->requests / out->elapsed_s : 0.0;
    bp_block(out->requests, out->failures, out->requests ? out->avg_ms : 0.0,
             out->requests ? out->min_ms : 0.0, out->requests ? out->max_ms : 0.0,
             out->requests ? out->p50_ms : 0.0, out->elapsed_s);
    bp_stamp(ts, sizeof ts);
    printf("[%s] search run finished, concurrency: %u, qps %.2f, p95 %.3f ms, p99 %.3f ms", ts,
           spec->conc, out->qps, out->p95_ms, out->p99_ms);
    if (!isnan(out->recall))
        printf(", recall@%zu %.4f", spec->k, out->recall);
    printf("\n");
    (void)fflush(stdout);
    rc = 0;
out:
    runner_free(&r);
    free(th);
    return rc;
}

/* ------------------------------------------------------------------ streaming */

size_t bc_stage_rows(const bc_stream_spec *spec, unsigned s)
{
    return (size_t)((uint64_t)spec->n_rows * s / spec->n_stages);
}

static void sleep_until(double t)
{
    for (;;) {
        double now = cli_now();
        if (now >= t)
            return;
        double d = t - now;
        struct timespec ts = { .tv_sec = (time_t)d, .tv_nsec = (long)((d - floor(d)) * 1e9) };
        if (nanosleep(&ts, NULL) == 0)
            return;
    }
}

int bc_run_stream(
    const bc_stream_spec *spec, bc_stage *stages, double *insert_s, char *err, size_t err_len)
{
    unsigned S = spec->n_stages;
    if (S == 0 || S > MAX_STAGES || (size_t)S > spec->n_rows || spec->conc == 0 ||
        spec->conc > 1024 || spec->rate <= 0 || spec->batch == 0 || spec->nq == 0) {
        snprintf(err, err_len,
                 "streaming: need 1..%u stages (at most one per row), 1..1024 threads, a "
                 "positive rate and batch",
                 MAX_STAGES);
        return -1;
    }
    runner r;
    pthread_t *th = calloc(spec->conc, sizeof *th);
    double tb[MAX_STAGES + 2] = { 0 }; /* stage start times; all are set once rows reach n_rows */
    if (th == NULL || runner_init(&r, spec->conc, S, spec->nq, spec->k) != 0) {
        snprintf(err, err_len, "out of memory for %u search threads", spec->conc);
        if (th != NULL)
            runner_free(&r);
        free(th);
        return -1;
    }
    r.streaming = true;
    r.search = spec->search;
    r.score = spec->score;
    r.ctx = spec->ctx;
    memset(stages, 0, S * sizeof *stages);
    int rc = -1;
    bool started = false;
    unsigned next = 1;
    size_t rows = 0;
    double t0 = cli_now();
    r.t_start = t0;
    char ts[48];
    while (rows < spec->n_rows) {
        size_t b = spec->n_rows - rows < spec->batch ? spec->n_rows - rows : spec->batch;
        sleep_until(t0 + (double)rows / spec->rate);
        if (spec->insert(spec->ctx, rows, b, err, err_len) != 0)
            goto stop;
        rows += b;
        while (next <= S && rows >= bc_stage_rows(spec, next)) {
            double now = cli_now();
            tb[next] = now;
            if (next > 1 && spec->indexed != NULL)
                stages[next - 2].indexed_rows = spec->indexed(spec->ctx);
            atomic_store_explicit(&r.stage, next, memory_order_relaxed);
            bp_stamp(ts, sizeof ts);
            printf("[%s] stream stage %u/%u: %zu rows (%.0f%%) after %.1f s (%.0f rows/s)\n", ts,
                   next, S, rows, 100.0 * (double)next / S, now - t0,
                   now > t0 ? (double)rows / (now - t0) : 0.0);
            (void)fflush(stdout);
            if (!started) {
                if (start_workers(&r, th, err, err_len) != 0)
                    goto out;
                started = true;
            }
            next++;
        }
    }
    *insert_s = cli_now() - t0;
    sleep_until(cli_now() + spec->final_s);
    tb[S + 1] = cli_now();
    if (spec->indexed != NULL)
        stages[S - 1].indexed_rows = spec->indexed(spec->ctx);
    rc = 0;
stop:
    atomic_store(&r.stop, true);
    if (started) {
        for (unsigned t = 0; t < spec->conc; t++)
            pthread_join(th[t], NULL);
    }
    if (rc != 0)
        goto out;
    for (unsigned s = 1; s <= S; s++) {
        bc_stage *st = &stages[s - 1];
        st->stage = s;
        st->fraction = (double)s / S;
        st->rows = bc_stage_rows(spec, s);
        if (stats_of(&r, s - 1, &st->st) != 0) {
            snprintf(err, err_len, "out of memory collecting latencies");
            rc = -1;
            goto out;
        }
        sum_counters(&r, s - 1, &st->st.failures, &st->st.recall);
        st->st.elapsed_s = tb[s + 1] - tb[s];
        st->st.qps = st->st.elapsed_s > 0 ? (double)st->st.requests / st->st.elapsed_s : 0.0;
    }
out:
    runner_free(&r);
    free(th);
    return rc;
}
