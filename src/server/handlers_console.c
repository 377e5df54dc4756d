/*
 * handlers_console.c: /v2/sextant/... — the routes the web console (docs/internals/WEBUI.md)
 * needs beyond Milvus's: the server at a glance, a collection's segments and files, benchmark
 * results kept under the data directory. Public API like the rest (any client may call them,
 * with the same credentials and privileges: rbac.c maps them to read privileges); the console
 * calls nothing else but Milvus's routes and GET /metrics.
 *
 *   server/describe        version, uptime, data directory / store, memory and disk, whether
 *                          the caller may write, and every database's collections with rows,
 *                          segments, memory, disk, load state and index build progress
 *   collections/segments   one collection's segments (rows, deletes, index state per vector
 *                          field, files with sizes, local or only in the store) and its indexes
 *   bench/list, bench/get  the *.json files of <data dir>/bench/ (sextant bench --json ...)
 *   collections/meta       one collection's metadata as the catalog keeps it (the fields as
 *                          declared, vector fields' metrics and index state, aliases): what the
 *                          cluster proxy's gRPC front end reads from the node holding it
 *
 * Disk figures come from the file system at the time of the call (stat of each file; the data
 * directory's total by a walk that does not follow links), so they are a snapshot: a compaction
 * or an upload running meanwhile may change them.
 *
 * Thread-safety: handlers keep no state.
 */
#define _XOPEN_SOURCE 700
#include <dirent.h>
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "server/rbac.h"
#include "server/server.h"
#include "util/alloc.h"

#define BENCH_DIR       "bench"
#define BENCH_MAX_BYTES (16u << 20) /* a bench result over this is refused, not read */

/* The build progress of every vector field's index of a collection (fields without one are
 * listed with state IndexStateNone, so a console can show what could be indexed). */
static json_t *index_progress(sx_collection *h, const sx__coll_meta *m)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < m->n_vecs; i++) {
        const sx__vec_meta *v = &m->vecs[i];
        sx_index_info ii;
        if (sx_index_describe_on(h, v->field, &ii) != SX_OK)
            continue;
        uint64_t sealed = ii.total_rows - ii.growing_rows;
        json_t *o = json_object();
        json_object_set_new(o, "fieldName", json_string(v->field));
        json_object_set_new(o, "indexName", json_string(v->index_name));
        json_object_set_new(o, "indexType",
                            json_string(v->index_type[0] ? v->index_type : ii.type));
        json_object_set_new(o, "metricType", json_string(sx__metric_name(v->metric)));
        json_object_set_new(o, "state", json_string(sx__index_state_name(ii.state)));
        json_object_set_new(o, "indexedRows", json_integer((json_int_t)ii.indexed_rows));
        json_object_set_new(o, "totalRows", json_integer((json_int_t)sealed));
        json_object_set_new(o, "pendingRows", json_integer((json_int_t)(sealed - ii.indexed_rows)));
        json_object_set_new(o, "buildingRows", json_integer((json_int_t)ii.building_rows));
        json_object_set_new(o, "growingRows", json_integer((json_int_t)ii.growing_rows));
        json_object_set_new(o, "memoryBytes", json_integer((json_int_t)ii.memory_bytes));
        json_object_set_new(o, "diskBytes", json_integer((json_int_t)ii.disk_bytes));
        json_object_set_new(o, "failReason", json_string(ii.fail_reason));
        json_array_append_new(arr, o);
    }
    for (size_t i = 0; i < m->n_sparse; i++) {
        const sx__sparse_meta *sp = &m->sparse[i];
        json_t *o = json_object();
        json_object_set_new(o, "fieldName", json_string(sp->field));
        json_object_set_new(o, "indexName", json_string(sp->index_name));
        json_object_set_new(o, "indexType", json_string(sp->index_type));
        json_object_set_new(o, "metricType", json_string(sp->function[0] ? "BM25" : "IP"));
        /* built per sealed segment on its first search: nothing waits to be built */
        json_object_set_new(o, "state",
                            json_string(sp->index_name[0] ? "Finished" : "IndexStateNone"));
        json_array_append_new(arr, o);
    }
    return arr;
}

static const char *storage_of(const sx__req *rq)
{
    const char *u = rq->opts->db.storage_url;
    return u && *u ? u : "local";
}

/* One collection at a glance (the overview's row). */
static json_t *coll_summary(sx__req *rq, const char *db, const char *name)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = sx__malloc(sizeof *m);
    if (!m)
        return NULL;
    if (sx__cat_coll_get(rq->cat, db, name, &h, m) != SX_OK) {
        sx__free(m);
        return NULL; /* dropped since the listing */
    }
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(m->name));
    sx_collection_info ci;
    if (sx_collection_describe(h, &ci) == SX_OK) {
        json_object_set_new(o, "rows", json_integer((json_int_t)ci.n_rows));
        json_object_set_new(o, "segments", json_integer((json_int_t)ci.n_segments));
        json_object_set_new(o, "growingRows", json_integer((json_int_t)ci.growing_rows));
        json_object_set_new(o, "memoryBytes", json_integer((json_int_t)ci.memory_bytes));
        json_object_set_new(o, "walBytes", json_integer((json_int_t)ci.wal_bytes));
    }
    sx_segment_desc *segs = NULL;
    size_t n = 0;
    if (sx_collection_segments(h, &segs, &n) == SX_OK) {
        uint64_t local = 0, remote = 0;
        for (size_t i = 0; i < n; i++)
            for (size_t f = 0; f < segs[i].n_files; f++)
                *(segs[i].files[f].remote ? &remote : &local) += segs[i].files[f].bytes;
        json_object_set_new(o, "diskBytes", json_integer((json_int_t)local));
        json_object_set_new(o, "storeOnlyBytes", json_integer((json_int_t)remote));
        sx_segments_free(segs);
    }
    json_object_set_new(o, "loadState",
                        json_string(m->loaded ? "LoadStateLoaded" : "LoadStateNotLoad"));
    json_object_set_new(o, "indexes", index_progress(h, m));
    sx_collection_release(h);
    sx__free(m);
    return o;
}

/* nftw has no context argument: the walk's sum lives in a thread-local. */
static _Thread_local uint64_t walk_bytes;

static int walk_add(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)path;
    (void)ftw;
    if (flag == FTW_F && S_ISREG(sb->st_mode))
        walk_bytes += (uint64_t)sb->st_size;
    return 0;
}

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f)
        return 0;
    char line[128];
    bool got = fgets(line, sizeof line, f) != NULL;
    (void)fclose(f);
    if (!got)
        return 0;
    char *end = NULL;
    (void)strtoull(line, &end, 10); /* total pages, then resident pages */
    errno = 0;
    unsigned long long res = strtoull(end, &end, 10);
    long page = sysconf(_SC_PAGESIZE);
    return errno == 0 && page > 0 ? (uint64_t)res * (uint64_t)page : 0;
}

/* Whether the caller may change data: read-only users-file entries may not; an API user when
 * its roles grant a write on every collection of db (the console hides write actions otherwise;
 * the server checks each request anyway). */
static bool can_write(sx__req *rq, const char *db)
{
    if (rq->read_only_user)
        return false;
    if (!rq->user)
        return true;
    sx__principal p = { SX__WHO_USER, "" };
    (void)snprintf(p.user, sizeof p.user, "%s", rq->user);
    json_t *body = json_pack("{s:s}", "collectionName", "*");
    char why[256];
    bool ok = body && sx__rbac_allowed(sx__server_rbac(rq->srv), &p, "/v2/vectordb/entities/delete",
                                       db, body, why, sizeof why);
    json_decref(body);
    return ok;
}

static void h_server_describe(sx__req *rq, sx__resp *rs)
{
    json_t *d = json_object();
    json_object_set_new(d, "version", json_string(sx_version()));
    json_object_set_new(d, "uptimeSeconds", json_real(sx__metrics_uptime_s(rq->metrics)));
    json_object_set_new(d, "dataDir", json_string(rq->opts->data_dir));
    json_object_set_new(d, "storage", json_string(storage_of(rq)));
    json_object_set_new(d, "health", json_string("ok"));
    json_object_set_new(d, "user", rq->login ? json_string(rq->login) : json_null());
    json_object_set_new(d, "canWrite", json_boolean(can_write(rq, rq->db_name)));
    json_object_set_new(d, "readOnly", json_boolean(rq->read_only_user));

    sx_memory_stats ms;
    sx__cat_memory_stats(rq->cat, &ms);
    json_t *mem = json_object();
    json_object_set_new(mem, "budgetBytes", json_integer((json_int_t)ms.limit_bytes));
    json_object_set_new(mem, "usedBytes", json_integer((json_int_t)ms.used_bytes));
    json_object_set_new(mem, "peakBytes", json_integer((json_int_t)ms.peak_bytes));
    json_object_set_new(mem, "indexBytes", json_integer((json_int_t)ms.index_bytes));
    json_object_set_new(mem, "cacheBytes", json_integer((json_int_t)ms.cache_bytes));
    json_object_set_new(mem, "rssBytes", json_integer((json_int_t)rss_bytes()));
    json_object_set_new(d, "memory", mem);

    json_t *disk = json_object();
    walk_bytes = 0;
    if (nftw(rq->opts->data_dir, walk_add, 16, FTW_PHYS) == 0)
        json_object_set_new(disk, "dataBytes", json_integer((json_int_t)walk_bytes));
    struct statvfs vf;
    if (statvfs(rq->opts->data_dir, &vf) == 0) {
        uint64_t frsize = vf.f_frsize, avail = vf.f_bavail, blocks = vf.f_blocks;
        uint64_t free_b = avail * frsize, total_b = blocks * frsize;
        json_object_set_new(disk, "freeBytes", json_integer((json_int_t)free_b));
        json_object_set_new(disk, "totalBytes", json_integer((json_int_t)total_b));
    }
    json_object_set_new(d, "disk", disk);

    json_t *dbs = json_array();
    char **dbn = NULL;
    size_t n_db = 0;
    sx_status st = sx__cat_db_list(rq->cat, &dbn, &n_db);
    if (st != SX_OK) {
        json_decref(d);
        json_decref(dbs);
        sx__fail_st(rs, st, SX__MC_UNEXPECTED, "list databases");
        return;
    }
    for (size_t i = 0; i < n_db; i++) {
        char **cn = NULL;
        size_t n_c = 0;
        if (sx__cat_coll_list(rq->cat, dbn[i], &cn, &n_c) != SX_OK)
            continue; /* dropped since the listing */
        json_t *colls = json_array();
        for (size_t k = 0; k < n_c; k++) {
            json_t *o = coll_summary(rq, dbn[i], cn[k]);
            if (o)
                json_array_append_new(colls, o);
        }
        sx_strings_free(cn, n_c);
        json_array_append_new(dbs, json_pack("{s:s,s:o}", "name", dbn[i], "collections", colls));
    }
    sx_strings_free(dbn, n_db);
    json_object_set_new(d, "databases", dbs);
    sx__ok(rs, d);
}

static const char *segidx_name(sx_segment_index_state s)
{
    switch (s) {
    case SX_SEGIDX_BUILT:
        return "Built";
    case SX_SEGIDX_PENDING:
        return "Pending";
    case SX_SEGIDX_NONE:
        break;
    }
    return "None";
}

static void h_meta(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", NULL, &m))
        return;
    json_t *j = sx__cat_meta_json(m);
    if (j)
        sx__ok(rs, j);
    else
        sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
    sx__req_coll_done(NULL, m);
}

static void h_segments(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", &h, &m))
        return;
    sx_segment_desc *segs = NULL;
    size_t n = 0;
    sx_status st = sx_collection_segments(h, &segs, &n);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "list segments");
        sx__req_coll_done(h, m);
        return;
    }
    /* the engine lists vector fields in its schema order, which is meta->vecs[]'s */
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++) {
        const sx_segment_desc *s = &segs[i];
        json_t *o = json_object();
        json_object_set_new(o, "id", sx__jint64_out(rq, (int64_t)s->id));
        json_object_set_new(o, "state", json_string(s->sealed ? "Sealed" : "Growing"));
        json_object_set_new(o, "rows", json_integer((json_int_t)s->rows));
        json_object_set_new(o, "deletedRows", json_integer((json_int_t)s->deleted_rows));
        json_object_set_new(o, "persisted", json_boolean(s->persisted));
        json_object_set_new(o, "indexMemoryBytes", json_integer((json_int_t)s->index_memory_bytes));
        json_t *ix = json_array();
        for (size_t v = 0; v < m->n_vecs && v < SX_MAX_VECTOR_FIELDS; v++)
            json_array_append_new(ix, json_pack("{s:s,s:s}", "fieldName", m->vecs[v].field, "state",
                                                segidx_name(s->index_state[v])));
        json_object_set_new(o, "indexes", ix);
        json_t *files = json_array();
        for (size_t f = 0; f < s->n_files; f++)
            json_array_append_new(files,
                                  json_pack("{s:s,s:I,s:s}", "name", s->files[f].name, "bytes",
                                            (json_int_t)s->files[f].bytes, "location",
                                            s->files[f].remote     ? "store"
                                            : s->files[f].in_store ? "local+store"
                                                                   : "local"));
        json_object_set_new(o, "files", files);
        json_array_append_new(arr, o);
    }
    sx_segments_free(segs);
    json_t *d = json_object();
    json_object_set_new(d, "collectionName", json_string(m->name));
    json_object_set_new(d, "storage", json_string(storage_of(rq)));
    json_object_set_new(d, "indexes", index_progress(h, m));
    json_object_set_new(d, "segments", arr);
    sx__ok(rs, d);
    sx__req_coll_done(h, m);
}

/* ------------------------------------------------------------------ bench results */

static bool bench_name_ok(const char *n)
{
    size_t len = strlen(n);
    if (len < 6 || len > 200 || strcmp(n + len - 5, ".json") != 0 || n[0] == '.')
        return false;
    for (const char *p = n; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '.' || *p == '_' || *p == '-'))
            return false;
    return true;
}

static void h_bench_list(sx__req *rq, sx__resp *rs)
{
    char dir[4096];
    (void)snprintf(dir, sizeof dir, "%s/%s", rq->opts->data_dir, BENCH_DIR);
    json_t *arr = json_array();
    DIR *d = opendir(dir);
    if (!d) {
        sx__ok(rs, arr); /* no bench/ directory: no results */
        return;
    }
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (!bench_name_ok(de->d_name))
            continue;
        char path[4096 + 256];
        (void)snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue; /* links are not followed out of the data directory */
        json_array_append_new(arr, json_pack("{s:s,s:I,s:I}", "name", de->d_name, "bytes",
                                             (json_int_t)sb.st_size, "modified",
                                             (json_int_t)sb.st_mtime));
    }
    (void)closedir(d);
    sx__ok(rs, arr);
}

static void h_bench_get(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "name", "BenchGetReq", &name))
        return;
    if (!bench_name_ok(name)) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: a bench result is named [A-Za-z0-9._-]+.json, got %s", name);
        return;
    }
    char path[4096 + 256];
    (void)snprintf(path, sizeof path, "%s/%s/%s", rq->opts->data_dir, BENCH_DIR, name);
    struct stat sb;
    if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: no bench result %s", name);
        return;
    }
    if ((uint64_t)sb.st_size > BENCH_MAX_BYTES) {
        sx__fail(rs, SX__MC_PARAM_TOO_LARGE, "bench result %s is %lld bytes, over the limit of %u",
                 name, (long long)sb.st_size, BENCH_MAX_BYTES);
        return;
    }
    json_error_t je;
    json_t *j = json_load_file(path, JSON_REJECT_DUPLICATES, &je);
    if (!j) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "bench result %s is not JSON: %s (line %d)", name,
                 je.text, je.line);
        return;
    }
    sx__ok(rs, j);
}

const sx__route sx__routes_console[] = {
    { "/v2/sextant/server/describe", h_server_describe, false },
    { "/v2/sextant/collections/segments", h_segments, false },
    { "/v2/sextant/collections/meta", h_meta, false },
    { "/v2/sextant/bench/list", h_bench_list, false },
    { "/v2/sextant/bench/get", h_bench_get, false },
    { NULL, NULL, false },
};
