/*
 * indexjob.c: the writer's and the index worker's halves of a remote index build; the keys and
 * the protocol are in indexjob.h and docs/internals/CLUSTER.md ("Index workers").
 *
 * Writer (build(), on an engine slot thread):
 *   1. no live index worker (node/<id> with role "index") -> SX_ENOTFOUND: the engine builds it;
 *   2. put job/index/<job> on the writer's lease (a leftover job and answer of the same key are
 *      deleted first); the put's revision identifies this job (its create_revision);
 *   3. poll every 100 ms: an answer for this revision -> download the object to out_path, delete
 *      it and the keys, SX_OK; an error answer -> the keys deleted, SX_EREMOTE (built here).
 *      Every second: no index worker alive for 3 s running, or the job unclaimed for 10 minutes,
 *      or the writer's lease lost -> withdrawn, built here; cancelled (a drop, close) -> withdrawn.
 * A worker killed mid-build leaves a claim on its lease; once that expires another worker claims
 * the job again, so the writer simply keeps waiting.
 *
 * Worker (one thread): every 200 ms (at once after a job) lists job/, claim/ and done/; claims the
 * first job nobody claimed or answered (txn: claim absent and the job's create_revision as
 * listed); downloads the segment to DATA/jobs/, builds, uploads, answers with a txn comparing the
 * job's create_revision (put on the writer's lease), deletes its local files and its claim. A
 * failed build is answered with its message (the writer then builds it itself). During the
 * build a second thread checks every 200 ms that the job still stands (job_gone): a withdrawn
 * job, a stopping worker or a lost lease stops the build.
 */
#include "cluster/indexjob.h"

#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cluster/etcd.h"
#include "platform/fs.h"
#include "util/alloc.h"
#include "util/err.h"

#define POLL_NS         100000000L
#define WORKER_IDLE_MS  200
#define NO_WORKER_S     3
#define UNCLAIMED_MAX_S 600

/* ---------------------------------------------------------------- shared */

static void sleep_ns(long ns)
{
    struct timespec ts = { ns / 1000000000L, ns % 1000000000L };
    nanosleep(&ts, NULL);
}

/* <kind>/index/<db>/<coll>/<seg>.<field> under the cluster prefix */
static void job_key(const sx__fence *f,
                    const char *kind,
                    const char *db,
                    const char *coll,
                    uint64_t seg,
                    const char *field,
                    char *out,
                    size_t cap)
{
    (void)snprintf(out, cap, "%s%s/index/%s/%s/%" PRIu64 ".%s", sx__fence_prefix(f), kind, db, coll,
                   seg, field);
}

/* How many nodes registered with role "index" (-1: etcd did not answer). */
static int live_workers(const sx__fence *f, sx__etcd *kv)
{
    char pre[256];
    (void)snprintf(pre, sizeof pre, "%snode/", sx__fence_prefix(f));
    sx__etcd_kv *kvs = NULL;
    size_t n = 0;
    if (sx__etcd_range(kv, pre, &kvs, &n, NULL) != SX_OK) {
        sx__err_clear();
        return -1;
    }
    int live = 0;
    for (size_t i = 0; i < n; i++)
        if (strstr(kvs[i].value, "\"role\":\"index\""))
            live++;
    sx__etcd_kvs_free(kvs, n);
    return live;
}

/* ---------------------------------------------------------------- writer */

struct sx__ijobs {
    sx__fence *f;
    char *s3_endpoint;
    sx__etcd *kv;
    sx_index_builder iface;
};

static void withdraw(sx__ijobs *j, const char *jk, const char *dk)
{
    sx__ignore(sx__etcd_del(j->kv, jk, false, NULL));
    sx__ignore(sx__etcd_del(j->kv, dk, false, NULL));
    sx__err_clear();
}

/* The job's JSON (owned string; NULL: out of memory). */
static char *job_json(const sx__ijobs *j, const sx_index_build_job *job)
{
    json_t *o = json_object(), *params = json_object();
    char lease[32], seg[32];
    (void)snprintf(lease, sizeof lease, "%" PRId64, sx__fence_lease(j->f));
    (void)snprintf(seg, sizeof seg, "%" PRIu64, job->segment_id);
    for (size_t i = 0; params && i < job->n_params; i++)
        json_object_set_new(params, job->params[i].key, json_string(job->params[i].value));
    if (o && params) {
        json_object_set_new(o, "writer", json_string(sx__fence_node_id(j->f)));
        json_object_set_new(o, "lease", json_string(lease));
        json_object_set_new(o, "store", json_string(job->store));
        json_object_set_new(o, "collection", json_string(job->collection));
        json_object_set_new(o, "segment", json_string(job->segment_key));
        json_object_set_new(o, "segId", json_string(seg));
        json_object_set_new(o, "field", json_string(job->field));
        json_object_set_new(o, "rows", json_integer((json_int_t)job->rows));
        json_object_set_new(o, "dim", json_integer((json_int_t)job->dim));
        json_object_set_new(o, "metric", json_integer((json_int_t)job->metric));
        json_object_set_new(o, "metricName", json_string(sx_metric_str(job->metric)));
        json_object_set_new(o, "type", json_string(job->index_type));
        json_object_set_new(o, "params", params);
        params = NULL;
    }
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(params);
    json_decref(o);
    return s;
}

/* The answer at dk, if it answers job revision rev: *object (owned) or *error (owned). */
static bool
read_answer(sx__ijobs *j, const char *dk, int64_t rev, char **object, char **side, char **error)
{
    sx__etcd_kv kv;
    if (sx__etcd_get(j->kv, dk, &kv, NULL) != SX_OK) {
        sx__err_clear();
        return false;
    }
    json_t *o = json_loads(kv.value, 0, NULL);
    sx__free(kv.key);
    sx__free(kv.value);
    bool mine = false;
    if (o) {
        const char *jr = json_string_value(json_object_get(o, "job"));
        char want[32];
        (void)snprintf(want, sizeof want, "%" PRId64, rev);
        mine = jr && strcmp(jr, want) == 0;
        const char *ob = json_string_value(json_object_get(o, "object"));
        const char *er = json_string_value(json_object_get(o, "error"));
        const char *sd = json_string_value(json_object_get(o, "side"));
        if (mine && ob) {
            *object = sx__strdup(ob);
            *side = sd ? sx__strdup(sd) : NULL;
        } else if (mine)
            *error = sx__strdup(er ? er : "an answer without an object");
        json_decref(o);
    }
    return mine;
}

static sx_status wr_build(void *ctx, const sx_index_build_job *job, const char *out_path)
{
    sx__ijobs *j = ctx;
    if (sx__fence_lost(j->f))
        return sx__err(SX_EFENCED, "the writer's lease is gone");
    if (live_workers(j->f, j->kv) <= 0)
        return sx__err(SX_ENOTFOUND, "no index worker");
    char db[SX_MAX_NAME + 1], jk[1024], ck[1024], dk[1024];
    sx__fence_db_of(j->f, job->store, db, sizeof db);
    job_key(j->f, "job", db, job->collection, job->segment_id, job->field, jk, sizeof jk);
    job_key(j->f, "claim", db, job->collection, job->segment_id, job->field, ck, sizeof ck);
    job_key(j->f, "done", db, job->collection, job->segment_id, job->field, dk, sizeof dk);
    char *val = job_json(j, job);
    if (!val)
        return sx__err(SX_ENOMEM, "index job");
    withdraw(j, jk, dk); /* a leftover of an earlier try of this build */
    sx_status st = sx__etcd_put(j->kv, jk, val, sx__fence_lease(j->f), NULL);
    sx__free(val);
    if (st != SX_OK)
        return st;
    /* the job's identity is the key's create_revision, as the workers see it (not the put's
     * revision: a put retried by the client, or a leftover the delete missed, keeps the key's
     * first one) */
    sx__etcd_kv jkv;
    st = sx__etcd_get(j->kv, jk, &jkv, NULL);
    if (st != SX_OK)
        return st;
    int64_t rev = jkv.create_revision;
    bool mine = jkv.lease == sx__fence_lease(j->f);
    sx__free(jkv.key);
    sx__free(jkv.value);
    if (!mine)
        return sx__err(SX_EREMOTE, "index job %s: the key is not on this writer's lease", jk);
    int64_t t0 = sx_clock_ns(), last_claim = t0, last_worker = t0, last_check = t0;
    char *object = NULL, *side = NULL, *error = NULL;
    for (;;) {
        if (job->cancelled(job)) {
            withdraw(j, jk, dk);
            return SX_ECANCELED;
        }
        if (read_answer(j, dk, rev, &object, &side, &error))
            break;
        int64_t now = sx_clock_ns();
        if (now - last_check >= 1000000000LL) {
            last_check = now;
            sx__etcd_kv kv;
            sx_status g = sx__etcd_get(j->kv, ck, &kv, NULL);
            if (g == SX_OK) {
                last_claim = now;
                sx__free(kv.key);
                sx__free(kv.value);
            }
            sx__err_clear();
            if (live_workers(j->f, j->kv) != 0) /* -1 (etcd busy): not a reason to give up */
                last_worker = now;
            const char *why = NULL;
            if (sx__fence_lost(j->f))
                why = "the writer's lease is gone";
            else if (now - last_worker > (int64_t)NO_WORKER_S * 1000000000LL)
                why = "no index worker is alive";
            else if (now - last_claim > (int64_t)UNCLAIMED_MAX_S * 1000000000LL)
                why = "no index worker claimed it";
            if (why) {
                withdraw(j, jk, dk);
                return sx__err(SX_EREMOTE, "index job %s: %s", jk, why);
            }
        }
        sleep_ns(POLL_NS);
    }
    if (error) {
        withdraw(j, jk, dk);
        st = sx__err(SX_EREMOTE, "index job %s failed on the worker: %s", jk, error);
        sx__free(error);
        return st;
    }
    st = sx_store_file_get(job->store, j->s3_endpoint, object, out_path);
    if (st == SX_OK && job->side_prefix) {
        /* DISKANN's graph and vectors file, beside the index file */
        char sp[4096];
        (void)snprintf(sp, sizeof sp, "%s.diskann", job->side_prefix);
        st = side ? sx_store_file_get(job->store, j->s3_endpoint, side, sp)
                  : sx__err(SX_EREMOTE, "index job %s: the answer has no side file", jk);
    }
    /* the writer's sync uploads its own copies, under its epoch */
    sx__ignore(sx_store_object_delete(job->store, j->s3_endpoint, object));
    if (side)
        sx__ignore(sx_store_object_delete(job->store, j->s3_endpoint, side));
    withdraw(j, jk, dk);
    if (st == SX_OK)
        (void)fprintf(stderr,
                      "writer %s: index of %s segment %" PRIu64 " (%s) built by a worker in "
                      "%.2f s\n",
                      sx__fence_node_id(j->f), job->collection, job->segment_id, job->field,
                      (double)(sx_clock_ns() - t0) / 1e9);
    sx__free(object);
    sx__free(side);
    return st;
}

sx_status sx__ijobs_new(sx__fence *f, const char *s3_endpoint, sx__ijobs **out)
{
    *out = NULL;
    sx__ijobs *j = sx__calloc(1, sizeof *j);
    if (!j)
        return sx__err(SX_ENOMEM, "index jobs");
    j->f = f;
    j->s3_endpoint = s3_endpoint ? sx__strdup(s3_endpoint) : NULL;
    sx_status st = s3_endpoint && !j->s3_endpoint ? sx__err(SX_ENOMEM, "index jobs")
                                                  : sx__etcd_new(sx__fence_etcd(f), 0, &j->kv);
    if (st != SX_OK) {
        sx__ijobs_free(j);
        return st;
    }
    j->iface = (sx_index_builder){ j, 8, wr_build };
    *out = j;
    return SX_OK;
}

const sx_index_builder *sx__ijobs_iface(sx__ijobs *j)
{
    return &j->iface;
}

void sx__ijobs_free(sx__ijobs *j)
{
    if (!j)
        return;
    sx__etcd_free(j->kv);
    sx__free(j->s3_endpoint);
    sx__free(j);
}

/* ---------------------------------------------------------------- worker */

struct sx__iworker {
    sx__fence *f;
    char *data_dir, *s3_endpoint;
    uint32_t threads;
    sx__etcd *kv;
    pthread_t thr;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop; /* guarded by mu */
    uint64_t built, failed;
};

static bool has_key(const sx__etcd_kv *kvs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kvs[i].key, key) == 0)
            return true;
    return false;
}

/* The claim key of job key jk ("<prefix>job/index/X" -> "<prefix>claim/index/X"). */
static void claim_of(const sx__iworker *w, const char *jk, char *ck, size_t cap)
{
    const char *pre = sx__fence_prefix(w->f);
    (void)snprintf(ck, cap, "%sclaim/%s", pre, jk + strlen(pre) + strlen("job/"));
}

/* Answers job (key jk, revision rev) with `answer` (JSON) on the writer's lease, only while the
 * job is the one claimed and this worker still holds its claim (a worker whose lease lapsed
 * mid-build and was replaced does not answer over the new claimant). */
static bool
answer(sx__iworker *w, const char *jk, const char *dk, int64_t rev, int64_t lease, const char *ans)
{
    char ck[1024];
    claim_of(w, jk, ck, sizeof ck);
    sx__etcd_cmp cmp[3] = { { jk, SX__ETCD_CREATE, rev, NULL },
                            { ck, SX__ETCD_VALUE, 0, sx__fence_node_id(w->f) },
                            { dk, SX__ETCD_CREATE, 0, NULL } };
    sx__etcd_op put = { SX__ETCD_PUT, dk, ans, lease };
    sx__etcd_txn_result r;
    if (sx__etcd_txn(w->kv, cmp, 3, &put, 1, NULL, 0, &r) != SX_OK) {
        sx__err_clear();
        return false;
    }
    bool ok = r.succeeded;
    sx__etcd_txn_result_fini(&r);
    return ok;
}

static const char *jstr(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

/* sx_segment_build_options.cancelled of a worker's build: is the job gone (checked in etcd every
 * 200 ms) or the worker stopping? */
typedef struct watch {
    sx__iworker *w;
    const char *jk;
    int64_t rev;
    int64_t last_ns;
} watch;

static int job_gone(void *ud)
{
    watch *wt = ud;
    pthread_mutex_lock(&wt->w->mu);
    bool stop = wt->w->stop;
    pthread_mutex_unlock(&wt->w->mu);
    if (stop || sx__fence_lost(wt->w->f))
        return 1;
    int64_t now = sx_clock_ns();
    if (now - wt->last_ns < 200000000LL)
        return 0;
    wt->last_ns = now;
    sx__etcd_kv kv;
    sx_status st = sx__etcd_get(wt->w->kv, wt->jk, &kv, NULL);
    if (st == SX_ENOTFOUND) {
        sx__err_clear();
        return 1;
    }
    if (st != SX_OK) { /* etcd busy: go on */
        sx__err_clear();
        return 0;
    }
    bool same = kv.create_revision == wt->rev;
    sx__free(kv.key);
    sx__free(kv.value);
    return same ? 0 : 1;
}

/* Runs a claimed job. */
static void run_job(sx__iworker *w, const sx__etcd_kv *job, const char *dk)
{
    json_t *o = json_loads(job->value, 0, NULL);
    const char *store = jstr(o, "store"), *seg = jstr(o, "segment"), *field = jstr(o, "field");
    const char *type = jstr(o, "type"), *coll = jstr(o, "collection"), *segid = jstr(o, "segId");
    int64_t lease = strtoll(jstr(o, "lease"), NULL, 10);
    json_t *jp = json_object_get(o, "params");
    sx_param params[32];
    size_t np = 0;
    const char *k;
    json_t *v;
    json_object_foreach(jp, k, v) {
        if (np < 32 && json_is_string(v))
            params[np++] = (sx_param){ k, json_string_value(v) };
    }
    sx_metric metric = (sx_metric)json_integer_value(json_object_get(o, "metric"));
    uint64_t rows = (uint64_t)json_integer_value(json_object_get(o, "rows"));
    char dir[4096], segpath[4096], out[4096], okey[1024], sprefix[4096], sfile[4200];
    char skey[1100] = "";
    (void)snprintf(dir, sizeof dir, "%s/jobs", w->data_dir);
    (void)snprintf(segpath, sizeof segpath, "%s/seg-%s.sxs", dir, segid);
    (void)snprintf(out, sizeof out, "%s/seg-%s.%s.idx", dir, segid, field);
    (void)snprintf(sprefix, sizeof sprefix, "%s/seg-%s.%s.side", dir, segid, field);
    (void)snprintf(sfile, sizeof sfile, "%s.diskann", sprefix); /* DISKANN's one side file */
    (void)snprintf(okey, sizeof okey, "%s/jobs/seg-%s.%s.%s.%" PRId64 ".idx", coll, segid, field,
                   sx__fence_node_id(w->f), job->create_revision);
    int64_t t0 = sx_clock_ns(), t1, t2;
    uint64_t got_rows = 0;
    sx_status st = o && *store && *seg && *field && *type && *coll && lease
                       ? SX_OK
                       : sx__err(SX_EINVAL, "a malformed job: %s", job->value);
    if (st == SX_OK)
        st = sx__fs_mkdir_p(dir);
    if (st == SX_OK)
        st = sx_store_file_get(store, w->s3_endpoint, seg, segpath);
    t1 = sx_clock_ns();
    if (st == SX_OK) {
        /* a job withdrawn meanwhile (its writer gone, the collection dropped, the build done
         * elsewhere) or this worker stopping ends the build early */
        watch wt = { w, job->key, job->create_revision, 0 };
        sx_segment_build_options bo = { w->threads, sprefix, job_gone, &wt };
        st = sx_index_build_segment_file(segpath, field, type, params, np, metric, &bo, out,
                                         &got_rows);
    }
    if (st == SX_OK && got_rows != rows)
        st = sx__err(SX_ECORRUPT, "segment %s has %" PRIu64 " rows, the job says %" PRIu64, seg,
                     got_rows, rows);
    t2 = sx_clock_ns();
    if (st == SX_OK)
        st = sx_store_file_put(store, w->s3_endpoint, okey, out);
    if (st == SX_OK && sx__fs_exists(sfile)) {
        (void)snprintf(skey, sizeof skey, "%s.diskann", okey);
        st = sx_store_file_put(store, w->s3_endpoint, skey, sfile);
    }
    int64_t t3 = sx_clock_ns();
    /* the answer, built with jansson (node ids and keys of any length stay valid JSON) */
    char rs[32];
    (void)snprintf(rs, sizeof rs, "%" PRId64, job->create_revision);
    json_t *a = json_object();
    json_object_set_new(a, "job", json_string(rs));
    json_object_set_new(a, "worker", json_string(sx__fence_node_id(w->f)));
    if (st == SX_OK) {
        json_object_set_new(a, "object", json_string(okey));
        if (skey[0])
            json_object_set_new(a, "side", json_string(skey));
        json_object_set_new(a, "downloadMs", json_real((double)(t1 - t0) / 1e6));
        json_object_set_new(a, "buildMs", json_real((double)(t2 - t1) / 1e6));
        json_object_set_new(a, "uploadMs", json_real((double)(t3 - t2) / 1e6));
        char *ans = json_dumps(a, JSON_COMPACT);
        if (!ans || !answer(w, job->key, dk, job->create_revision, lease, ans)) {
            /* withdrawn meanwhile, or the claim lost to another worker */
            sx__ignore(sx_store_object_delete(store, w->s3_endpoint, okey));
            if (skey[0])
                sx__ignore(sx_store_object_delete(store, w->s3_endpoint, skey));
            sx__err_clear();
        } else {
            w->built++;
            (void)fprintf(stderr,
                          "index worker %s: %s of %s segment %s (%" PRIu64 " rows, %s) built in "
                          "%.2f s (download %.2f s, upload %.2f s)\n",
                          sx__fence_node_id(w->f), type, coll, segid, got_rows, field,
                          (double)(t2 - t1) / 1e9, (double)(t1 - t0) / 1e9,
                          (double)(t3 - t2) / 1e9);
        }
        sx__free(ans);
    } else {
        w->failed++;
        (void)fprintf(stderr, "index worker %s: job %s failed: %s\n", sx__fence_node_id(w->f),
                      job->key, sx_errmsg());
        /* a cancelled build (the job withdrawn, this worker stopping) is not answered: the job
         * is gone, or another worker claims it once this one's claim is released */
        if (st != SX_ECANCELED) {
            json_object_set_new(a, "error", json_string(sx_errmsg()));
            char *e = json_dumps(a, JSON_COMPACT);
            if (e && lease)
                sx__ignore(answer(w, job->key, dk, job->create_revision, lease, e));
            sx__free(e);
        }
        sx__err_clear();
    }
    json_decref(a);
    sx__ignore(sx__fs_unlink(segpath));
    sx__ignore(sx__fs_unlink(out));
    sx__ignore(sx__fs_unlink(sfile));
    sx__err_clear();
    json_decref(o);
}

/* Claims and runs one job. false: none to take. */
static bool take_one(sx__iworker *w)
{
    const char *pre = sx__fence_prefix(w->f);
    char jp[256], cp[256], dp[256];
    (void)snprintf(jp, sizeof jp, "%sjob/index/", pre);
    (void)snprintf(cp, sizeof cp, "%sclaim/index/", pre);
    (void)snprintf(dp, sizeof dp, "%sdone/index/", pre);
    sx__etcd_kv *jobs = NULL, *claims = NULL, *dones = NULL;
    size_t nj = 0, nc = 0, nd = 0;
    bool took = false;
    if (sx__etcd_range(w->kv, jp, &jobs, &nj, NULL) != SX_OK || nj == 0 ||
        sx__etcd_range(w->kv, cp, &claims, &nc, NULL) != SX_OK ||
        sx__etcd_range(w->kv, dp, &dones, &nd, NULL) != SX_OK)
        goto out;
    size_t pl = strlen(jp);
    for (size_t i = 0; i < nj && !took; i++) {
        char ck[1024], dk[1024];
        (void)snprintf(ck, sizeof ck, "%s%s", cp, jobs[i].key + pl);
        (void)snprintf(dk, sizeof dk, "%s%s", dp, jobs[i].key + pl);
        if (has_key(claims, nc, ck) || has_key(dones, nd, dk))
            continue;
        sx__etcd_cmp cmp[2] = { { ck, SX__ETCD_CREATE, 0, NULL },
                                { jobs[i].key, SX__ETCD_CREATE, jobs[i].create_revision, NULL } };
        sx__etcd_op put = { SX__ETCD_PUT, ck, sx__fence_node_id(w->f), sx__fence_lease(w->f) };
        sx__etcd_txn_result r;
        if (sx__etcd_txn(w->kv, cmp, 2, &put, 1, NULL, 0, &r) != SX_OK)
            break;
        bool mine = r.succeeded;
        sx__etcd_txn_result_fini(&r);
        if (!mine)
            continue; /* another worker was first */
        took = true;
        (void)fprintf(stderr, "index worker %s: claimed %s\n", sx__fence_node_id(w->f),
                      jobs[i].key + strlen(pre));
        run_job(w, &jobs[i], dk);
        /* the claim goes only if it is still ours */
        sx__etcd_cmp own = { ck, SX__ETCD_VALUE, 0, sx__fence_node_id(w->f) };
        sx__etcd_op del = { SX__ETCD_DEL, ck, NULL, 0 };
        sx__etcd_txn_result dr;
        if (sx__etcd_txn(w->kv, &own, 1, &del, 1, NULL, 0, &dr) == SX_OK)
            sx__etcd_txn_result_fini(&dr);
    }
out:
    sx__err_clear();
    sx__etcd_kvs_free(jobs, nj);
    sx__etcd_kvs_free(claims, nc);
    sx__etcd_kvs_free(dones, nd);
    return took;
}

static void *worker_main(void *arg)
{
    sx__iworker *w = arg;
    sx_io_phase_set(SX_IO_PHASE_BUILD);
    for (;;) {
        pthread_mutex_lock(&w->mu);
        bool stop = w->stop;
        pthread_mutex_unlock(&w->mu);
        if (stop || sx__fence_lost(w->f))
            break;
        if (take_one(w))
            continue;
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += WORKER_IDLE_MS * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&w->mu);
        if (!w->stop)
            (void)pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        pthread_mutex_unlock(&w->mu);
    }
    return NULL;
}

sx_status sx__iworker_start(sx__fence *f,
                            const char *data_dir,
                            const char *s3_endpoint,
                            uint32_t threads,
                            sx__iworker **out)
{
    *out = NULL;
    sx__iworker *w = sx__calloc(1, sizeof *w);
    if (!w)
        return sx__err(SX_ENOMEM, "index worker");
    w->f = f;
    w->threads = threads;
    w->data_dir = sx__strdup(data_dir);
    w->s3_endpoint = s3_endpoint ? sx__strdup(s3_endpoint) : NULL;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    sx_status st = w->data_dir && (!s3_endpoint || w->s3_endpoint)
                       ? sx__etcd_new(sx__fence_etcd(f), 0, &w->kv)
                       : sx__err(SX_ENOMEM, "index worker");
    if (st == SX_OK && pthread_create(&w->thr, NULL, worker_main, w) != 0)
        st = sx__err(SX_ENOMEM, "index worker thread");
    if (st != SX_OK) {
        sx__etcd_free(w->kv);
        sx__free(w->data_dir);
        sx__free(w->s3_endpoint);
        pthread_mutex_destroy(&w->mu);
        pthread_cond_destroy(&w->cv);
        sx__free(w);
        return st;
    }
    *out = w;
    return SX_OK;
}

void sx__iworker_stop(sx__iworker *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
    pthread_join(w->thr, NULL);
    sx__etcd_free(w->kv);
    sx__free(w->data_dir);
    sx__free(w->s3_endpoint);
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
    sx__free(w);
}
