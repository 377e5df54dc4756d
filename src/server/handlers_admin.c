/*
 * handlers_admin.c: /v2/vectordb/partitions/... and /v2/vectordb/databases/...
 * (milvus-rest-v2.md sections 7.3 and 7.4).
 *
 * Partitions are names in the collection metadata ("_default" first, at most SX__MAX_PARTS); each
 * row carries its partition in the hidden VARCHAR column SX__PART_FIELD, so a partition's rows are
 * the filter `sx_part_ == "NAME"`: get_stats counts them, drop deletes them. Partition names obey
 * the collection-name rule ([A-Za-z_][A-Za-z0-9_]*), so they need no quoting in a filter. Load
 * state is per collection: loading partitions loads the collection; releasing every partition
 * releases it, releasing some is accepted and changes nothing (searches still see all partitions
 * unless partitionNames narrows them).
 *
 * Databases are the catalog's (one sx_db each, dir/databases/NAME/).
 *
 * Aliases (/v2/vectordb/aliases/create, drop, alter, describe, list): names of collections kept
 * in the collection's metadata (sx__cat_alias_*); every route that takes a collectionName takes an
 * alias as well, so an application switches the collection behind a name with one alter.
 *
 * Thread-safety: handlers keep no state.
 */
#include <stdio.h>
#include <string.h>

#include "server/server.h"
#include "util/alloc.h"
#include "util/err.h"

static bool valid_name(const char *s)
{
    if (!s || !*s || strlen(s) > SX_MAX_NAME)
        return false;
    if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') || *s == '_'))
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_'))
            return false;
    return true;
}

static int find_part(const sx__coll_meta *m, const char *name)
{
    return sx__meta_part_find(m, name);
}

/* ---------------------------------------------------------------- partitions */

/* Partition key mode manages its partitions itself: Milvus refuses these operations on them
 * (1100, its messages). True when refused. */
static bool key_mode_refuses(sx__resp *rs, const sx__coll_meta *m, const char *what)
{
    if (!m->key_parts)
        return false;
    sx__fail(rs, SX__MC_INVALID_PARAM,
             "invalid parameter: disable %s if partition key mode is used (collection %s)", what,
             m->name);
    return true;
}

static void h_part_list(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", NULL, &m))
        return;
    json_t *arr = json_array();
    char pb[SX_MAX_NAME + 1];
    for (size_t i = 0; i < sx__meta_n_parts(m); i++)
        json_array_append_new(arr, json_string(sx__meta_part_name(m, i, pb)));
    sx__ok(rs, arr);
    sx__req_coll_done(NULL, m);
}

/* collectionName + partitionName (PartitionReq). */
static bool
req_part(sx__req *rq, sx__resp *rs, sx_collection **h, sx__coll_meta **m, const char **part)
{
    const char *c = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "PartitionReq", &c) ||
        !sx__need_str(rq, rs, "partitionName", "PartitionReq", part))
        return false;
    return sx__req_coll(rq, rs, "PartitionReq", h, m);
}

/* Partition list and load changes, run by sx__cat_coll_modify on fresh metadata. */
typedef struct part_ctx {
    sx__resp *rs;
    const char *part;    /* create / drop */
    const json_t *names; /* release: partitionNames */
    bool answered;       /* rs holds the error */
} part_ctx;

static sx_status part_add_fn(void *ctx, sx__coll_meta *m)
{
    part_ctx *p = ctx;
    if (find_part(m, p->part) >= 0)
        return SX_OK; /* Milvus: adding an existing partition succeeds */
    if (m->n_parts >= SX__MAX_PARTS) {
        sx__fail(p->rs, SX__MC_UNEXPECTED,
                 "partition number (%d) exceeds max configuration (%d), collection: %s",
                 (int)m->n_parts + 1, SX__MAX_PARTS, m->name);
        p->answered = true;
        return SX_EINVAL;
    }
    (void)snprintf(m->parts[m->n_parts], sizeof m->parts[0], "%s", p->part);
    m->n_parts++;
    return SX_OK;
}

static sx_status part_del_fn(void *ctx, sx__coll_meta *m)
{
    part_ctx *p = ctx;
    int idx = find_part(m, p->part);
    if (idx < 0)
        return SX_OK;
    memmove(m->parts[idx], m->parts[idx + 1], (m->n_parts - (size_t)idx - 1) * sizeof m->parts[0]);
    m->n_parts--;
    return SX_OK;
}

/* every partition released -> the collection is released */
static sx_status part_release_fn(void *ctx, sx__coll_meta *m)
{
    part_ctx *p = ctx;
    bool all = true;
    for (size_t i = 0; i < m->n_parts && all; i++) {
        bool listed = false;
        size_t k;
        const json_t *n;
        json_array_foreach(p->names, k, n) {
            listed |= json_is_string(n) && strcmp(json_string_value(n), m->parts[i]) == 0;
        }
        all = listed;
    }
    if (all)
        m->loaded = false;
    return SX_OK;
}

static void h_part_create(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    const char *part = NULL;
    if (!req_part(rq, rs, NULL, &m, &part))
        return;
    if (key_mode_refuses(rs, m, "create partition"))
        goto out;
    if (!m->has_partitions) {
        sx__fail(rs, SX__MC_UNSUPPORTED,
                 "unsupported operation: collection %s was not created through the REST API, so "
                 "it has no partition column; partitions are not supported on it",
                 m->name);
        goto out;
    }
    if (!valid_name(part)) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: partition name %s is illegal: the first character must be "
                 "an underscore or a letter, the others underscores, letters or digits",
                 part);
        goto out;
    }
    part_ctx p = { rs, part, NULL, false };
    sx_status st = sx__cat_coll_modify(rq->cat, rq->db_name, m->name, part_add_fn, &p);
    if (st != SX_OK && !p.answered)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "create partition");
    else if (st == SX_OK)
        sx__ok(rs, NULL);
out:
    sx__req_coll_done(NULL, m);
}

static void h_part_drop(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    const char *part = NULL;
    if (!req_part(rq, rs, &h, &m, &part))
        return;
    if (key_mode_refuses(rs, m, "drop partition"))
        goto out;
    if (strcmp(part, "_default") == 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: default partition cannot be deleted");
        goto out;
    }
    int idx = find_part(m, part);
    if (idx < 0) {
        sx__ok(rs, NULL); /* Milvus: dropping a missing partition succeeds */
        goto out;
    }
    /* rows first: a crash in between leaves the partition listed and empty, never rows whose
     * partition is gone */
    char filter[SX_MAX_NAME + 32];
    (void)snprintf(filter, sizeof filter, "%s == \"%s\"", SX__PART_FIELD, part);
    sx_status st = m->has_partitions ? sx_delete_where(h, filter, NULL) : SX_OK;
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "drop partition");
        goto out;
    }
    part_ctx p = { rs, part, NULL, false };
    st = sx__cat_coll_modify(rq->cat, rq->db_name, m->name, part_del_fn, &p);
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "drop partition");
    else
        sx__ok(rs, NULL);
out:
    sx__req_coll_done(h, m);
}

static void h_part_has(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    const char *part = NULL;
    if (!req_part(rq, rs, NULL, &m, &part))
        return;
    sx__ok(rs, json_pack("{s:b}", "has", find_part(m, part) >= 0));
    sx__req_coll_done(NULL, m);
}

static void h_part_stats(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    const char *part = NULL;
    if (!req_part(rq, rs, &h, &m, &part))
        return;
    if (find_part(m, part) < 0) {
        sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]", part);
        goto out;
    }
    uint64_t n = 0;
    sx_status st;
    if (m->has_partitions) {
        char filter[SX_MAX_NAME + 32];
        (void)snprintf(filter, sizeof filter, "%s == \"%s\"", SX__PART_FIELD, part);
        st = sx_count(h, filter, &n);
    } else {
        st = sx_count(h, NULL, &n); /* no partition column: every row is in _default */
    }
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "get partition stats");
    else
        sx__ok(rs, json_pack("{s:I}", "rowCount", (json_int_t)n));
out:
    sx__req_coll_done(h, m);
}

/* collectionName + partitionNames[] (PartitionsReq); every name must exist (200). */
static bool
req_parts(sx__req *rq, sx__resp *rs, sx_collection **h, sx__coll_meta **m, const json_t **names)
{
    const char *c = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "PartitionsReq", &c))
        return false;
    const json_t *pn = sx__jget(rq->body, "partitionNames");
    if (pn && !json_is_array(pn)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal value into "
                 "Go struct field PartitionsReq.partitionNames of type []string");
        return false;
    }
    if (!pn || json_array_size(pn) == 0) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'PartitionsReq.PartitionNames' "
                 "Error:Field validation for 'PartitionNames' failed on the 'required' tag");
        return false;
    }
    if (!sx__req_coll(rq, rs, "PartitionsReq", h, m))
        return false;
    size_t i;
    const json_t *p;
    json_array_foreach(pn, i, p) {
        if (!json_is_string(p) || find_part(*m, json_string_value(p)) < 0) {
            sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]",
                     json_is_string(p) ? json_string_value(p) : "?");
            sx__req_coll_done(h ? *h : NULL, *m);
            if (h)
                *h = NULL;
            *m = NULL;
            return false;
        }
    }
    *names = pn;
    return true;
}

static void h_part_load(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    const json_t *names = NULL;
    if (!req_parts(rq, rs, &h, &m, &names))
        return;
    if (!key_mode_refuses(rs, m, "load partitions") && sx__coll_load(rq, rs, h, m))
        sx__ok(rs, NULL);
    sx__req_coll_done(h, m);
}

static void h_part_release(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    const json_t *names = NULL;
    if (!req_parts(rq, rs, NULL, &m, &names))
        return;
    if (key_mode_refuses(rs, m, "release partitions")) {
        sx__req_coll_done(NULL, m);
        return;
    }
    part_ctx p = { rs, NULL, names, false };
    sx_status st =
        m->loaded ? sx__cat_coll_modify(rq->cat, rq->db_name, m->name, part_release_fn, &p) : SX_OK;
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "release partitions");
    else
        sx__ok(rs, NULL);
    sx__req_coll_done(NULL, m);
}

/* ---------------------------------------------------------------- databases */

static void h_db_list(sx__req *rq, sx__resp *rs)
{
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__cat_db_list(rq->cat, &names, &n);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "list databases");
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(names[i]));
    sx_strings_free(names, n);
    sx__ok(rs, arr);
}

/* dbName from the body (required). */
static bool req_db(sx__req *rq, sx__resp *rs, const char *sname, const char **db)
{
    return sx__need_str(rq, rs, "dbName", sname, db);
}

static bool props_arg(sx__resp *rs, const json_t *body, const char *sname, const json_t **out)
{
    const json_t *p = sx__jget(body, "properties");
    if (p && !json_is_object(p)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal value into "
                 "Go struct field %s.properties of type map[string]interface {}",
                 sname);
        return false;
    }
    *out = p;
    return true;
}

static void h_db_create(sx__req *rq, sx__resp *rs)
{
    const char *db = NULL;
    const json_t *props = NULL;
    if (!req_db(rq, rs, "DatabaseReqWithProperties", &db) ||
        !props_arg(rs, rq->body, "DatabaseReqWithProperties", &props))
        return;
    if (!valid_name(db)) {
        sx__fail(rs, SX__MC_DB_INVALID,
                 "invalid database name[database=%s]: the first character of a database name "
                 "must be an underscore or a letter, the others underscores, letters or digits",
                 db);
        return;
    }
    sx_status st = sx__cat_db_create(rq->cat, db);
    if (st == SX_EEXIST) {
        sx__fail(rs, SX__MC_UNEXPECTED, "database already exist: %s", db);
        return;
    }
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "create database");
        return;
    }
    if (props && json_object_size(props) > 0) {
        json_t *p = json_object();
        sx__props_merge(p, props);
        st = sx__cat_db_set_props(rq->cat, db, p);
        json_decref(p);
        if (st != SX_OK) {
            sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "create database");
            return;
        }
    }
    sx__ok(rs, NULL);
}

static void h_db_drop(sx__req *rq, sx__resp *rs)
{
    const char *db = NULL;
    if (!req_db(rq, rs, "DatabaseReqRequiredName", &db))
        return;
    if (strcmp(db, "default") == 0) {
        sx__fail(rs, SX__MC_UNEXPECTED, "can not drop default database");
        return;
    }
    sx_status st = sx__cat_db_drop(rq->cat, db);
    if (st != SX_OK && st != SX_ENOTFOUND) { /* Milvus: dropping a missing database succeeds */
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "drop database");
        return;
    }
    sx__ok(rs, NULL);
}

static void h_db_describe(sx__req *rq, sx__resp *rs)
{
    const char *db = NULL;
    if (!req_db(rq, rs, "DatabaseReqRequiredName", &db))
        return;
    json_t *props = NULL;
    int64_t id = 0;
    sx_status st = sx__cat_db_describe(rq->cat, db, &props, &id);
    if (st == SX_ENOTFOUND) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", db);
        return;
    }
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "describe database");
        return;
    }
    json_t *d = json_object();
    json_object_set_new(d, "dbName", json_string(db));
    json_object_set_new(d, "dbID", json_integer(id));
    json_object_set_new(d, "properties", sx__props_to_kv(props));
    json_decref(props);
    sx__ok(rs, d);
}

static void change_props(sx__req *rq, sx__resp *rs, bool drop)
{
    const char *sname = drop ? "DropDatabasePropertiesReq" : "DatabaseReqWithProperties";
    const char *db = NULL;
    const json_t *np = NULL, *keys = NULL;
    if (!req_db(rq, rs, sname, &db))
        return;
    if (drop) {
        keys = sx__jget(rq->body, "propertyKeys");
        if (keys && !json_is_array(keys)) {
            sx__fail(rs, SX__MC_BAD_JSON,
                     "can only accept json format request, error: json: cannot unmarshal value "
                     "into Go struct field %s.propertyKeys of type []string",
                     sname);
            return;
        }
    } else if (!props_arg(rs, rq->body, sname, &np)) {
        return;
    }
    json_t *props = NULL;
    sx_status st = sx__cat_db_describe(rq->cat, db, &props, NULL);
    if (st == SX_ENOTFOUND) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", db);
        return;
    }
    if (st == SX_OK) {
        if (drop) {
            size_t i;
            const json_t *k;
            json_array_foreach(keys, i, k) {
                if (json_is_string(k))
                    json_object_del(props, json_string_value(k));
            }
        } else if (np) {
            sx__props_merge(props, np);
        }
        st = sx__cat_db_set_props(rq->cat, db, props);
    }
    json_decref(props);
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND,
                    drop ? "drop database properties" : "alter database properties");
    else
        sx__ok(rs, NULL);
}

static void h_db_alter(sx__req *rq, sx__resp *rs)
{
    change_props(rq, rs, false);
}

static void h_db_drop_props(sx__req *rq, sx__resp *rs)
{
    change_props(rq, rs, true);
}

/* ---------------------------------------------------------------- aliases */

static void alias_fail(sx__resp *rs, sx_status st, const char *what)
{
    if (st == SX_EEXIST) /* the name is taken: a parameter error, as Milvus answers it */
        sx__fail(rs, SX__MC_INVALID_PARAM, "%s: %s", what, sx_errmsg());
    else
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, what);
}

/* aliasName (and collectionName when `coll`) of an AliasReq / AliasCollectionReq. */
static bool req_alias(sx__req *rq, sx__resp *rs, const char **alias, const char **coll)
{
    const char *req = coll ? "AliasCollectionReq" : "AliasReq";
    if (coll && !sx__need_str(rq, rs, "collectionName", req, coll))
        return false;
    return sx__need_str(rq, rs, "aliasName", req, alias);
}

/* create ('c'), drop ('d') and alter ('a'): the same request shape and answer */
static void alias_write(sx__req *rq, sx__resp *rs, int op)
{
    const char *alias = NULL, *coll = NULL;
    if (!req_alias(rq, rs, &alias, op == 'd' ? NULL : &coll) ||
        (op == 'c' && !sx__check_coll_name(rs, alias, "alias")))
        return;
    sx_status st = op == 'c'   ? sx__cat_alias_create(rq->cat, rq->db_name, alias, coll)
                   : op == 'a' ? sx__cat_alias_alter(rq->cat, rq->db_name, alias, coll)
                               : sx__cat_alias_drop(rq->cat, rq->db_name, alias);
    if (st != SX_OK)
        alias_fail(rs, st, op == 'c' ? "create alias" : op == 'a' ? "alter alias" : "drop alias");
    else
        sx__ok(rs, NULL);
}

static void h_alias_create(sx__req *rq, sx__resp *rs)
{
    alias_write(rq, rs, 'c');
}

static void h_alias_drop(sx__req *rq, sx__resp *rs)
{
    alias_write(rq, rs, 'd');
}

static void h_alias_alter(sx__req *rq, sx__resp *rs)
{
    alias_write(rq, rs, 'a');
}

static void h_alias_describe(sx__req *rq, sx__resp *rs)
{
    const char *alias = NULL;
    if (!req_alias(rq, rs, &alias, NULL))
        return;
    char coll[SX_MAX_NAME + 1];
    sx_status st = sx__cat_alias_describe(rq->cat, rq->db_name, alias, coll);
    if (st != SX_OK) {
        alias_fail(rs, st, "describe alias");
        return;
    }
    sx__ok(rs, json_pack("{s:s,s:s,s:s}", "aliasName", alias, "collectionName", coll, "dbName",
                         rq->db_name && *rq->db_name ? rq->db_name : "default"));
}

static void h_alias_list(sx__req *rq, sx__resp *rs)
{
    const char *coll = NULL;
    if (sx__jstr(rq->body, "collectionName", &coll) != 0) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: collectionName must be a string");
        return;
    }
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__cat_alias_list(rq->cat, rq->db_name, coll, &names, &n);
    if (st != SX_OK) {
        alias_fail(rs, st, "list aliases");
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(names[i]));
    sx_strings_free(names, n);
    sx__ok(rs, arr);
}

const sx__route sx__routes_admin[] = {
    { "/v2/vectordb/partitions/list", h_part_list, false },
    { "/v2/vectordb/partitions/create", h_part_create, true },
    { "/v2/vectordb/partitions/drop", h_part_drop, true },
    { "/v2/vectordb/partitions/has", h_part_has, false },
    { "/v2/vectordb/partitions/get_stats", h_part_stats, false },
    { "/v2/vectordb/partitions/load", h_part_load, true },
    { "/v2/vectordb/partitions/release", h_part_release, true },
    { "/v2/vectordb/databases/list", h_db_list, false },
    { "/v2/vectordb/databases/create", h_db_create, true },
    { "/v2/vectordb/databases/drop", h_db_drop, true },
    { "/v2/vectordb/databases/describe", h_db_describe, false },
    { "/v2/vectordb/databases/alter", h_db_alter, true },
    { "/v2/vectordb/databases/drop_properties", h_db_drop_props, true },
    { "/v2/vectordb/aliases/create", h_alias_create, true },
    { "/v2/vectordb/aliases/drop", h_alias_drop, true },
    { "/v2/vectordb/aliases/alter", h_alias_alter, true },
    { "/v2/vectordb/aliases/describe", h_alias_describe, false },
    { "/v2/vectordb/aliases/list", h_alias_list, false },
    { NULL, NULL, false },
};
