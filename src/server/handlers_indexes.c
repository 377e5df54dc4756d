/*
 * handlers_indexes.c: /v2/vectordb/indexes/... (milvus-rest-v2.md sections 7.1, 7.2 and 8).
 *
 * Each vector field of a collection (up to four) has at most one index (the engine's,
 * sx_index_create_on), with a name unique in the collection (default: the field's name); its
 * name and the type the client asked for ("AUTOINDEX", "HNSW", ...) are kept in the field's
 * entry of the collection metadata (meta.vecs[]), the build state comes from
 * sx_index_describe_on. describe, drop and the properties routes find an index by its name; one
 * indexes/create may carry an entry per field. Scalar index requests (INVERTED,
 * STL_SORT, Trie, BITMAP, or AUTOINDEX on a scalar field) are accepted and build nothing: the
 * engine's filters scan columns, which is what such an index would speed up. They are not listed.
 *
 * Build params arrive as numbers or strings (the Node SDK types M as a string) and are handed to
 * the engine as strings; index_type and metric_type inside params are not build params.
 *
 * The metric belongs to the index (Milvus). A vector index asks for metricType (default: the
 * field's, or COSINE while it is pending); when it differs and the field has no index yet, the
 * engine field's metric changes first (sx_collection_set_metric_on: L2 <-> IP as
 * stored, to COSINE normalises the stored rows; from COSINE with rows is refused, 1100). Metric
 * change, engine index creation and the metadata write run as one sx__cat_coll_modify, under the
 * catalog's DDL lock, so concurrent creates cannot interleave. With an index, another metric is
 * refused (1100).
 *
 * The creation of one indexParams entry (sx__index_apply) lives in request.c, because
 * collections/create with indexParams runs it too; this file has the routes.
 *
 * Thread-safety: handlers keep no state.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "server/server.h"
#include "util/alloc.h"
#include "util/err.h"

static void h_create(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "IndexParamReq", &name))
        return;
    const json_t *ips = sx__jget(rq->body, "indexParams");
    if (ips && !json_is_array(ips)) {
        sx__fail(rs, SX__MC_BAD_JSON,
                 "can only accept json format request, error: json: cannot unmarshal value into "
                 "Go struct field IndexParamReq.indexParams of type []httpserver.IndexParam");
        return;
    }
    if (!ips) {
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'IndexParamReq.IndexParams' "
                 "Error:Field validation for 'IndexParams' failed on the 'required' tag");
        return;
    }
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "IndexParamReq", &h, &m))
        return;
    size_t i;
    const json_t *ip;
    bool ok = true;
    json_array_foreach(ips, i, ip) {
        if (!sx__index_apply(rq, rs, h, m, ip)) {
            ok = false;
            break;
        }
    }
    if (ok)
        sx__ok(rs, NULL);
    sx__req_coll_done(h, m);
}

/* Resolves collectionName + indexName (both required, IndexReq). */
static bool req_index(sx__req *rq,
                      sx__resp *rs,
                      const char *sname,
                      sx_collection **h,
                      sx__coll_meta **m,
                      const char **iname)
{
    const char *c = NULL;
    if (!sx__need_str(rq, rs, "collectionName", sname, &c) ||
        !sx__need_str(rq, rs, "indexName", sname, iname))
        return false;
    return sx__req_coll(rq, rs, sname, h, m);
}

/* A build parameter's value as JSON: a number where the text is one (pymilvus compares
 * Collection.index().params with the numbers it sent: {"M": 16}, not {"M": "16"}), else the
 * string. */
static json_t *param_json(const char *s)
{
    char *end = NULL;
    errno = 0;
    long long i = strtoll(s, &end, 10);
    if (*s && end && !*end && errno == 0)
        return json_integer((json_int_t)i);
    double d = strtod(s, &end);
    if (*s && end && !*end && isfinite(d))
        return json_real(d);
    return json_string(s);
}

/* A sparse field's index: nothing is built ahead (the engine builds each sealed segment's
 * inverted lists on its first search), so it is Finished with every sealed row indexed; the
 * row counts are the collection's (its first dense field's). */
static void describe_sparse(sx__resp *rs, sx_collection *h, const sx__coll_meta *m, int si)
{
    const sx__sparse_meta *s = &m->sparse[si];
    sx_collection_info ci; /* live rows: sealed and growing */
    sx_status st = sx_collection_describe(h, &ci);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_INDEX_NOT_FOUND, "describe index");
        return;
    }
    uint64_t sealed = ci.n_rows > ci.growing_rows ? ci.n_rows - ci.growing_rows : 0;
    json_t *o = json_object();
    json_object_set_new(o, "indexName", json_string(s->index_name));
    json_object_set_new(o, "fieldName", json_string(s->field));
    json_object_set_new(o, "indexType", json_string(s->index_type));
    json_object_set_new(o, "metricType", json_string(s->function[0] ? "BM25" : "IP"));
    json_object_set_new(o, "totalRows", json_integer((json_int_t)sealed));
    json_object_set_new(o, "indexedRows", json_integer((json_int_t)sealed));
    json_object_set_new(o, "pendingRows", json_integer(0));
    json_object_set_new(o, "growingRows", json_integer((json_int_t)ci.growing_rows));
    json_object_set_new(o, "indexState", json_string("Finished"));
    json_object_set_new(o, "failReason", json_string(""));
    char buf[32];
    (void)snprintf(buf, sizeof buf, "%g", (double)s->drop_ratio_build);
    json_t *bp = json_object();
    json_object_set_new(bp, "drop_ratio_build", param_json(buf));
    if (s->algo[0])
        json_object_set_new(bp, "inverted_index_algo", json_string(s->algo));
    if (s->function[0]) {
        (void)snprintf(buf, sizeof buf, "%g", (double)s->bm25_k1);
        json_object_set_new(bp, "bm25_k1", param_json(buf));
        (void)snprintf(buf, sizeof buf, "%g", (double)s->bm25_b);
        json_object_set_new(bp, "bm25_b", param_json(buf));
    }
    json_object_set_new(o, "params", bp);
    json_t *arr = json_array();
    json_array_append_new(arr, o);
    sx__ok(rs, arr);
}

static void h_describe(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    const char *iname = NULL;
    if (!req_index(rq, rs, "IndexReq", &h, &m, &iname))
        return;
    int si = sx__meta_sparse_index_at(m, iname);
    if (si >= 0) {
        describe_sparse(rs, h, m, si);
        sx__req_coll_done(h, m);
        return;
    }
    sx_index_info ii;
    int vi = sx__meta_index_at(m, iname);
    const sx__vec_meta *v = vi >= 0 ? &m->vecs[vi] : NULL;
    sx_status st = v ? sx_index_describe_on(h, v->field, &ii) : SX_OK;
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_INDEX_NOT_FOUND, "describe index");
    } else if (!v || ii.state == SX_INDEX_NONE) {
        sx__fail(rs, SX__MC_INDEX_NOT_FOUND, "index not found[indexName=%s]", iname);
    } else {
        json_t *o = json_object();
        json_object_set_new(o, "indexName", json_string(v->index_name));
        json_object_set_new(o, "fieldName", json_string(v->field));
        json_object_set_new(o, "indexType",
                            json_string(v->index_type[0] ? v->index_type : ii.type));
        json_object_set_new(o, "metricType", json_string(sx__metric_name(v->metric)));
        /* Milvus counts sealed (flushed) segments only: indexState Finished means every sealed
         * row is indexed, so Finished comes with indexedRows == totalRows. Rows of the growing
         * segment (searched exactly until sealed) are in growingRows, a Sextant extension. */
        uint64_t sealed = ii.total_rows - ii.growing_rows;
        json_object_set_new(o, "totalRows", json_integer((json_int_t)sealed));
        json_object_set_new(o, "indexedRows", json_integer((json_int_t)ii.indexed_rows));
        json_object_set_new(o, "pendingRows", json_integer((json_int_t)(sealed - ii.indexed_rows)));
        json_object_set_new(o, "growingRows", json_integer((json_int_t)ii.growing_rows));
        json_object_set_new(o, "indexState", json_string(sx__index_state_name(ii.state)));
        json_object_set_new(o, "failReason", json_string(ii.fail_reason));
        /* the build params the engine uses ("M=16,efConstruction=200"), as an object (numbers
         * as numbers):
         * a Sextant extension of the REST answer; gRPC's DescribeIndex gives it as Milvus does,
         * the "params" entry's JSON text (pymilvus shows it in Collection.index().params) */
        json_t *bp = json_object();
        for (char *kv = ii.params, *next; kv && *kv; kv = next) {
            next = strchr(kv, ',');
            if (next)
                *next++ = '\0';
            char *eq = strchr(kv, '=');
            if (eq && eq != kv) {
                *eq = '\0';
                json_object_set_new(bp, kv, param_json(eq + 1));
            }
        }
        json_object_set_new(o, "params", bp);
        json_t *arr = json_array();
        json_array_append_new(arr, o);
        sx__ok(rs, arr);
    }
    sx__req_coll_done(h, m);
}

static void h_list(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", NULL, &m))
        return;
    json_t *arr = json_array();
    for (size_t i = 0; i < m->n_vecs; i++)
        if (m->vecs[i].index_name[0])
            json_array_append_new(arr, json_string(m->vecs[i].index_name));
    for (size_t i = 0; i < m->n_sparse; i++)
        if (m->sparse[i].index_name[0])
            json_array_append_new(arr, json_string(m->sparse[i].index_name));
    sx__ok(rs, arr);
    sx__req_coll_done(NULL, m);
}

typedef struct drop_ctx {
    sx__resp *rs;
    sx_collection *h;
    const char *iname;
    bool answered;
} drop_ctx;

static sx_status drop_fn(void *ctx, sx__coll_meta *m)
{
    drop_ctx *d = ctx;
    int vi = sx__meta_index_at(m, d->iname), si = sx__meta_sparse_index_at(m, d->iname);
    if ((vi >= 0 || si >= 0) && m->loaded) {
        sx__fail(d->rs, SX__MC_UNEXPECTED,
                 "index cannot be dropped, collection is loaded, please release it first");
        d->answered = true;
        return SX_EBUSY;
    }
    if (si >= 0) {
        sx__sparse_meta *s = &m->sparse[si];
        s->index_name[0] = s->index_type[0] = s->algo[0] = '\0';
        s->drop_ratio_build = 0;
        return SX_OK;
    }
    if (vi < 0)
        return SX_OK; /* Milvus: dropping an index that is not there succeeds */
    sx__vec_meta *v = &m->vecs[vi];
    if (m->loaded) {
        sx__fail(d->rs, SX__MC_UNEXPECTED,
                 "index cannot be dropped, collection is loaded, please release it first");
        d->answered = true;
        return SX_EBUSY;
    }
    sx_status st = sx_index_drop_on(d->h, v->field);
    if (st != SX_OK && st != SX_ENOTFOUND) {
        sx__fail_st(d->rs, st, SX__MC_INDEX_NOT_FOUND, "drop index");
        d->answered = true;
        return st;
    }
    v->index_name[0] = v->index_type[0] = '\0';
    return SX_OK;
}

static void h_drop(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    const char *iname = NULL;
    if (!req_index(rq, rs, "IndexReq", &h, &m, &iname))
        return;
    drop_ctx d = { rs, h, iname, false };
    sx_status st = sx__cat_coll_modify(rq->cat, rq->db_name, m->name, drop_fn, &d);
    if (st != SX_OK && !d.answered)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "drop index");
    else if (st == SX_OK)
        sx__ok(rs, NULL);
    sx__req_coll_done(h, m);
}

/* alter_properties / drop_properties: Milvus's one configurable index property is mmap.enabled
 * (a boolean); Sextant already maps its index files, so there is nothing to change, and the calls
 * succeed once the index is found and the properties are valid: `properties` a non-empty object
 * of mmap.enabled (alter), `propertyKeys` a non-empty array naming it (drop); others are 1100. */
static bool index_props_valid(sx__resp *rs, const json_t *body, bool drop)
{
    const json_t *p = sx__jget(body, drop ? "propertyKeys" : "properties");
    if (drop ? !json_is_array(p) || json_array_size(p) == 0
             : !json_is_object(p) || json_object_size(p) == 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: %s must be a non-empty %s",
                 drop ? "propertyKeys" : "properties", drop ? "array" : "object");
        return false;
    }
    size_t i;
    const char *k;
    const json_t *v;
    json_array_foreach(drop ? p : NULL, i, v) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "mmap.enabled") != 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: %s is not a configurable index property (mmap.enabled "
                     "is)",
                     json_is_string(v) ? json_string_value(v) : "?");
            return false;
        }
    }
    json_object_foreach((json_t *)(drop ? NULL : p), k, v) {
        bool b = false;
        if (strcmp(k, "mmap.enabled") != 0 || sx__jbool(p, k, &b) != 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: %s is not a configurable index property, or not a "
                     "boolean (mmap.enabled is)",
                     k);
            return false;
        }
    }
    return true;
}

static void props(sx__req *rq, sx__resp *rs, bool drop)
{
    sx__coll_meta *m = NULL;
    const char *iname = NULL;
    if (!req_index(rq, rs, "IndexReqWithProperties", NULL, &m, &iname))
        return;
    if (sx__meta_index_at(m, iname) < 0)
        sx__fail(rs, SX__MC_INDEX_NOT_FOUND, "index not found[indexName=%s]", iname);
    else if (index_props_valid(rs, rq->body, drop))
        sx__ok(rs, NULL);
    sx__req_coll_done(NULL, m);
}

static void h_props_alter(sx__req *rq, sx__resp *rs)
{
    props(rq, rs, false);
}

static void h_props_drop(sx__req *rq, sx__resp *rs)
{
    props(rq, rs, true);
}

const sx__route sx__routes_indexes[] = {
    { "/v2/vectordb/indexes/create", h_create, true },
    { "/v2/vectordb/indexes/describe", h_describe, false },
    { "/v2/vectordb/indexes/list", h_list, false },
    { "/v2/vectordb/indexes/drop", h_drop, true },
    { "/v2/vectordb/indexes/alter_properties", h_props_alter, true },
    { "/v2/vectordb/indexes/drop_properties", h_props_drop, true },
    { NULL, NULL, false },
};
