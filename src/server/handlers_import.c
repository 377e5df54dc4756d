/*
 * handlers_import.c: /v2/vectordb/jobs/import/{create,list,get_progress,describe}, Milvus's
 * bulk-import job API over the engine's import jobs (sextant.h "bulk import"; the catalog maps
 * client to engine collection names: sx__cat_import_*).
 *
 *   create        {collectionName, partitionName?, files: [["a.json"], ["f1.npy", "f2.npy"]],
 *                 options?} -> {"code": 0, "data": {"jobId": "..."}}. The files are checked
 *                 when the job runs (a failed job says why in `reason`); the request is refused
 *                 at once for a missing collection or partition and for no files. Keys of JSON
 *                 rows outside the schema go to the dynamic field when the collection has one
 *                 (else they fail the job), and every row gets the partition asked for.
 *   list          {collectionName?} -> data.records [{jobId, collectionName, state, progress}]
 *   get_progress, describe  {jobId} -> {jobId, collectionName, state (Pending, Importing,
 *                 Completed, Failed), progress (0-100), importedRows, totalRows, fileSize,
 *                 reason, completeTime, details: one per group of files {fileName, fileSize,
 *                 state, progress, importedRows, totalRows, completeTime}}
 * File names are the engine's: a local path, a key of the server's object store (relative,
 * with --storage), or s3://BUCKET/KEY. With --import-root (sx_server_options.import_root) local
 * paths must lie under that directory, links resolved (path_allowed). Messages of failed jobs keep
 * the file names the client gave (they are the client's own). Thread-safety: handlers keep no
 * state; the jobs are the engine's (its import thread).
 */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"
#include "util/alloc.h"
#include "util/err.h"

#define MAX_GROUPS 1024u

static bool has_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

/* With --import-root: a local path (not an object-store key) must lie under the root once its
 * directory's links are resolved (the file itself may not exist yet: the job then fails with
 * "does not exist"). True when allowed. */
static bool path_allowed(const sx__req *rq, const char *path)
{
    const char *root = rq->opts ? rq->opts->import_root : NULL;
    if (!root || !*root || has_prefix(path, "s3://"))
        return true;
    bool store = rq->opts->db.storage_url && *rq->opts->db.storage_url;
    if (!has_prefix(path, "file://") && path[0] != '/' && store)
        return true; /* a key of the server's store */
    const char *p = has_prefix(path, "file://") ? path + 7 : path;
    char rroot[PATH_MAX], dir[PATH_MAX], rdir[PATH_MAX];
    if (!realpath(root, rroot))
        return false;
    const char *slash = strrchr(p, '/');
    const char *base = slash ? slash + 1 : p;
    if (!*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0)
        return false;
    if (!slash)
        (void)snprintf(dir, sizeof dir, ".");
    else if (slash == p)
        (void)snprintf(dir, sizeof dir, "/");
    else
        (void)snprintf(dir, sizeof dir, "%.*s", (int)(slash - p), p);
    if (!realpath(dir, rdir))
        return false;
    size_t rl = strlen(rroot);
    if (rl == 1) /* the root is "/" */
        return true;
    return strncmp(rdir, rroot, rl) == 0 && (rdir[rl] == '\0' || rdir[rl] == '/');
}

static void iso_time(int64_t ms, char *buf, size_t n)
{
    buf[0] = '\0';
    if (ms <= 0)
        return;
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    if (gmtime_r(&t, &tm))
        (void)strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void h_create(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "ImportReq", &name))
        return;
    const char *part = NULL;
    if (sx__jstr(rq->body, "partitionName", &part) < 0) {
        sx__fail(rs, SX__MC_BAD_JSON, "partitionName must be a string");
        return;
    }
    bool part_given = part && *part;
    if (!part_given)
        part = "_default";
    const json_t *files = sx__jget(rq->body, "files");
    if (!files) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'ImportReq.Files' Error:Field "
                 "validation for 'Files' failed on the 'required' tag");
        return;
    }
    if (!json_is_array(files) || json_array_size(files) == 0 ||
        json_array_size(files) > MAX_GROUPS) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "files must be a non-empty array (at most %u) of arrays of file names",
                 MAX_GROUPS);
        return;
    }
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "ImportReq", NULL, &m))
        return;
    if (part_given && m->key_parts) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: not support manually specifying the partition names if "
                 "partition key mode is used");
        sx__req_coll_done(NULL, m);
        return;
    }
    bool found = m->key_parts || strcmp(part, "_default") == 0 || sx__meta_part_find(m, part) >= 0;
    if (!found) {
        sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]", part);
        sx__req_coll_done(NULL, m);
        return;
    }
    /* the hidden columns: a JSON row's keys outside the schema go to the dynamic field (as
     * entities/insert puts them), and every row into the partition asked for */
    sx_param pconst = { SX__PART_FIELD, part };
    /* partition key mode: each row to the partition its key hashes to, as entities/insert */
    const sx__field_meta *kf = m->has_partitions ? sx__meta_key_field(m) : NULL;
    char key_name[SX_MAX_NAME + 1] = "";
    if (kf)
        memcpy(key_name, kf->name, sizeof key_name);
    bool consts = m->has_partitions && !kf;
    sx_import_opts io = { .dynamic_field = m->enable_dynamic ? SX__META_FIELD : NULL,
                          .consts = consts ? &pconst : NULL,
                          .n_consts = consts ? 1 : 0,
                          .route_field = kf ? SX__PART_FIELD : NULL,
                          .route_key = kf ? key_name : NULL,
                          .route_prefix = "_default_",
                          .route_parts = kf ? m->key_parts : 0 };
    sx__req_coll_done(NULL, m);
    size_t ng = json_array_size(files);
    sx_import_group *groups = sx__calloc(ng, sizeof *groups);
    if (!groups) {
        sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
        return;
    }
    bool ok = true;
    for (size_t g = 0; ok && g < ng; g++) {
        const json_t *arr = json_array_get(files, g);
        size_t nf = json_is_array(arr) ? json_array_size(arr) : 0;
        if (nf == 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "files[%zu] must be a non-empty array of file names",
                     g);
            ok = false;
            break;
        }
        const char **paths = sx__calloc(nf, sizeof *paths);
        if (!paths) {
            sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
            ok = false;
            break;
        }
        groups[g].paths = paths;
        groups[g].n_paths = nf;
        for (size_t i = 0; i < nf; i++) {
            const char *s = json_string_value(json_array_get(arr, i));
            if (!s || !*s) {
                sx__fail(rs, SX__MC_INVALID_PARAM, "files[%zu][%zu] must be a file name", g, i);
                ok = false;
                break;
            }
            if (!path_allowed(rq, s)) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "files[%zu][%zu] is outside the server's import root (--import-root)", g,
                         i);
                ok = false;
                break;
            }
            paths[i] = s; /* borrowed from the body; the engine copies them */
        }
    }
    char job[SX_IMPORT_JOB_ID];
    if (ok) {
        sx_status st = sx__cat_import_submit(rq->cat, rq->db_name, name, groups, ng, &io, job);
        if (st != SX_OK) {
            sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "import");
        } else {
            json_t *d = json_object();
            json_object_set_new(d, "jobId", json_string(job));
            sx__ok(rs, d);
        }
    }
    for (size_t g = 0; g < ng; g++)
        sx__free((void *)groups[g].paths);
    sx__free(groups);
}

static json_t *job_json(const sx_import_job_info *j, bool full)
{
    json_t *o = json_object();
    json_object_set_new(o, "jobId", json_string(j->job_id));
    json_object_set_new(o, "collectionName", json_string(j->collection));
    json_object_set_new(o, "state", json_string(sx_import_state_str(j->state)));
    json_object_set_new(o, "progress", json_integer(j->percent));
    if (!full)
        return o;
    char t[32];
    iso_time(j->complete_time_ms, t, sizeof t);
    uint64_t total = j->state == SX_IMPORT_COMPLETED ? j->rows_imported : j->progress.rows_total;
    json_object_set_new(
        o, "importedRows",
        json_integer((json_int_t)(j->state == SX_IMPORT_COMPLETED ? j->rows_imported : 0)));
    json_object_set_new(o, "totalRows", json_integer((json_int_t)total));
    json_object_set_new(o, "fileSize", json_integer((json_int_t)j->progress.bytes_total));
    json_object_set_new(o, "reason", json_string(j->reason));
    json_object_set_new(o, "completeTime", json_string(t));
    json_t *details = json_array();
    for (size_t g = 0; g < j->n_groups; g++) {
        const struct sx_import_group_info *gi = &j->groups[g];
        json_t *d = json_object();
        json_object_set_new(d, "fileName", json_string(gi->files));
        json_object_set_new(d, "fileSize", json_integer((json_int_t)gi->total_bytes));
        json_object_set_new(d, "state", json_string(sx_import_state_str(gi->state)));
        int64_t pct = gi->state == SX_IMPORT_COMPLETED ? 100
                      : gi->total_bytes                ? (int64_t)(gi->bytes * 99 / gi->total_bytes)
                                                       : 0;
        json_object_set_new(d, "progress", json_integer(pct));
        json_object_set_new(
            d, "importedRows",
            json_integer((json_int_t)(gi->state == SX_IMPORT_COMPLETED ? gi->rows : 0)));
        json_object_set_new(d, "totalRows", json_integer((json_int_t)gi->rows));
        json_object_set_new(d, "completeTime",
                            json_string(gi->state == SX_IMPORT_COMPLETED ? t : ""));
        json_array_append_new(details, d);
    }
    json_object_set_new(o, "details", details);
    return o;
}

static void h_progress(sx__req *rq, sx__resp *rs)
{
    const char *id = NULL;
    if (!sx__need_str(rq, rs, "jobId", "GetImportReq", &id))
        return;
    sx_import_job_info j;
    sx_status st = sx__cat_import_get(rq->cat, rq->db_name, id, &j);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_INVALID_PARAM, "import");
        return;
    }
    sx__ok(rs, job_json(&j, true));
    sx_import_job_info_fini(&j);
}

static void h_list(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (sx__jstr(rq->body, "collectionName", &name) < 0) {
        sx__fail(rs, SX__MC_BAD_JSON, "collectionName must be a string");
        return;
    }
    sx_import_job_info *infos = NULL;
    size_t n = 0;
    sx_status st = sx__cat_import_list(rq->cat, rq->db_name, name, &infos, &n);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "import");
        return;
    }
    json_t *recs = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(recs, job_json(&infos[i], false));
    sx_import_jobs_free(infos, n);
    json_t *d = json_object();
    json_object_set_new(d, "records", recs);
    sx__ok(rs, d);
}

const sx__route sx__routes_import[] = {
    { "/v2/vectordb/jobs/import/create", h_create, true },
    { "/v2/vectordb/jobs/import/list", h_list, false },
    { "/v2/vectordb/jobs/import/get_progress", h_progress, false },
    { "/v2/vectordb/jobs/import/describe", h_progress, false },
    { NULL, NULL, false },
};
