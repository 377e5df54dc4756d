/*
 * handlers_collections.c: /v2/vectordb/collections/... (milvus-rest-v2.md section 5).
 *
 * Each handler decodes its request the way Milvus's gin binding does (json.c), resolves the
 * collection through the catalog, calls the engine and answers with Milvus's codes and shapes.
 *
 * Sextant differences a client can see, each answered with a clear message:
 *  - the metric belongs to the vector index, as in Milvus, one per vector field: quick setup
 *    takes metricType (default COSINE); in a custom schema each vector field takes its own
 *    indexParams entry's metricType (else the request's metricType, else COSINE) when it has
 *    one, and otherwise its metric stays pending (meta.vecs[i].metric_pending, engine field L2
 *    with raw vectors; the request's metricType, which the Node SDK always fills, is ignored as
 *    Milvus ignores it) until the field's first indexes/create picks it (request.c
 *    sx__index_apply). Once a field has an index its metric is that index's; another metric is
 *    refused (1100) until the index is dropped;
 *  - one to four FloatVector fields per collection (Milvus's proxy.maxVectorFieldNum; a fifth is
 *    1100 "maximum vector field's number should be limited to 4"); load needs an index on every
 *    one of them (700, as Milvus); binary,
 *    float16, sparse and int8 vectors and functions are refused with 1100 "... not supported by
 *    Sextant yet";
 *  - load state: a collection is "loaded" as soon as load succeeds (the engine serves searches at
 *    once, exactly on rows without an index); get_load_state reports LoadStateLoading with the
 *    indexed fraction while an index build is running, LoadStateLoaded when it has finished;
 *  - compaction is synchronous, so get_compaction_state is always "Completed".
 *
 * Thread-safety: handlers keep no state; the catalog and the engine do their own locking.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "server/analyzer.h"
#include "server/server.h"
#include "util/alloc.h"
#include "util/err.h"

static json_t *meta_props(const sx__coll_meta *m)
{
    json_t *p = json_loads(m->properties[0] ? m->properties : "{}", 0, NULL);
    if (!json_is_object(p)) {
        json_decref(p);
        p = json_object();
    }
    return p;
}

/* Stores props (JSON object) into meta->properties; false when it does not fit. */
static bool set_meta_props(sx__coll_meta *m, const json_t *props)
{
    size_t n = json_dumpb(props, NULL, 0, JSON_COMPACT | JSON_SORT_KEYS);
    if (n == 0 || n >= sizeof m->properties)
        return false;
    (void)json_dumpb(props, m->properties, n, JSON_COMPACT | JSON_SORT_KEYS);
    m->properties[n] = '\0';
    return true;
}

/* "LoadStateLoaded" etc.; *progress is 0..100: while some vector field's index build runs, the
 * indexed share of the sealed rows over every vector field. */
static const char *load_state(sx_collection *h, const sx__coll_meta *m, int *progress)
{
    *progress = 0;
    if (!m->loaded)
        return "LoadStateNotLoad";
    uint64_t indexed = 0, sealed = 0;
    bool building = false;
    for (size_t i = 0; i < m->n_vecs; i++) {
        sx_index_info ii;
        if (sx_index_describe_on(h, m->vecs[i].field, &ii) != SX_OK)
            continue;
        uint64_t s = ii.total_rows > ii.growing_rows ? ii.total_rows - ii.growing_rows : 0;
        building |= ii.state == SX_INDEX_IN_PROGRESS;
        sealed += s;
        indexed += ii.indexed_rows < s ? ii.indexed_rows : s;
    }
    if (!building) {
        *progress = 100;
        return "LoadStateLoaded";
    }
    uint64_t p = sealed ? indexed * 100 / sealed : 0;
    *progress = p > 99 ? 99 : (int)p;
    return "LoadStateLoading";
}

static int64_t new_job_id(void)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return ((int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000) << 18;
}

static void fail_type(sx__resp *rs, const char *sname, const char *key, const char *go_type)
{
    sx__fail(rs, SX__MC_BAD_JSON,
             "can only accept json format request, error: json: cannot unmarshal value into Go "
             "struct field %s.%s of type %s",
             sname, key, go_type);
}

/* ---------------------------------------------------------------- create */

static const char *const milvus_types[] = {
    "Bool",          "Int8",          "Int16",          "Int32",
    "Int64",         "Float",         "Double",         "VarChar",
    "String",        "Array",         "JSON",           "BinaryVector",
    "FloatVector",   "Float16Vector", "BFloat16Vector", "SparseFloatVector",
    "Int8Vector",    "Geometry",      "Text",           "Timestamptz",
    "ArrayOfVector", "ArrayOfStruct", "None",           NULL
};

static bool known_type(const char *t)
{
    for (size_t i = 0; milvus_types[i]; i++)
        if (strcmp(milvus_types[i], t) == 0)
            return true;
    return false;
}

static sx_field_type engine_type(const char *t)
{
    if (!strcmp(t, "Int8") || !strcmp(t, "Int16") || !strcmp(t, "Int32") || !strcmp(t, "Int64"))
        return SX_FIELD_INT64;
    if (!strcmp(t, "Float") || !strcmp(t, "Double"))
        return SX_FIELD_DOUBLE;
    if (!strcmp(t, "Bool"))
        return SX_FIELD_BOOL;
    if (!strcmp(t, "VarChar") || !strcmp(t, "String") || !strcmp(t, "JSON") || !strcmp(t, "Array"))
        return SX_FIELD_VARCHAR;
    if (!strcmp(t, "FloatVector"))
        return SX_FIELD_FLOAT_VECTOR;
    if (!strcmp(t, "Float16Vector"))
        return SX_FIELD_FLOAT16_VECTOR;
    if (!strcmp(t, "BFloat16Vector"))
        return SX_FIELD_BFLOAT16_VECTOR;
    if (!strcmp(t, "BinaryVector"))
        return SX_FIELD_BINARY_VECTOR;
    if (!strcmp(t, SX__SPARSE_TYPE)) /* the engine's sparse text in a VARCHAR column */
        return SX_FIELD_VARCHAR;
    return (sx_field_type)0;
}

/* A type param (dim, max_length) given as a number or a numeric string. 0 absent, -1 bad. */
static int type_param(const json_t *obj, const char *key, int64_t *out)
{
    json_t *v = sx__jget(obj, key);
    if (!v)
        return 0;
    return sx__json_to_int64(v, out) ? 1 : -1;
}

static bool set_field(sx__field_meta *f, const char *name, const char *type)
{
    if (strlen(name) > SX_MAX_NAME)
        return false;
    (void)snprintf(f->name, sizeof f->name, "%s", name);
    (void)snprintf(f->type, sizeof f->type, "%s", type);
    f->engine_type = engine_type(type);
    return true;
}

/* An Array field's element type, max_capacity and (VarChar elements) max_length, from the
 * field object fo and its elementTypeParams tp. The array is stored as its JSON text. */
static bool array_params(
    sx__resp *rs, const sx__coll_meta *m, sx__field_meta *f, const json_t *fo, const json_t *tp)
{
    static const char *const elems[] = { "Bool",  "Int8",   "Int16",   "Int32", "Int64",
                                         "Float", "Double", "VarChar", "String" };
    const char *et = NULL;
    if (sx__jstr(fo, "elementDataType", &et) != 0)
        et = NULL;
    bool ok = false;
    for (size_t i = 0; et && i < sizeof elems / sizeof elems[0]; i++)
        ok = ok || strcmp(et, elems[i]) == 0;
    if (!ok) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: elementDataType of the Array field %s must be one of Bool, "
                 "Int8, Int16, Int32, Int64, Float, Double, VarChar (got %s)",
                 f->name, et ? et : "nothing");
        return false;
    }
    int64_t v = 0;
    int r = type_param(tp, "max_capacity", &v);
    if (r <= 0 || v <= 0 || v > SX__MAX_ARRAY_CAPACITY) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: type param(max_capacity) should be specified for the array "
                 "field %s of collection %s, in range 1..%u",
                 f->name, m->name, SX__MAX_ARRAY_CAPACITY);
        return false;
    }
    (void)snprintf(f->elem_type, sizeof f->elem_type, "%s", et);
    f->max_capacity = (uint32_t)v;
    if (!strcmp(et, "VarChar") || !strcmp(et, "String")) {
        r = type_param(tp, "max_length", &v);
        if (r <= 0 || v <= 0 || v > SX_MAX_VARCHAR) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: type param(max_length) should be specified for the "
                     "VarChar elements of the array field %s of collection %s, in range 1..%u",
                     f->name, m->name, SX_MAX_VARCHAR);
            return false;
        }
        f->elem_max_length = (uint32_t)v;
    }
    f->max_length = SX_MAX_VARCHAR;
    return true;
}

/* Whether metric m applies to vector type t: L2 / IP / COSINE to the float types, HAMMING /
 * JACCARD to binary (the engine refuses the others too; this answers before anything is made). */
static bool metric_fits(sx_field_type t, sx_metric m)
{
    bool bin_metric = m == SX_METRIC_HAMMING || m == SX_METRIC_JACCARD;
    return (t == SX_FIELD_BINARY_VECTOR) == bin_metric;
}

static bool quick_schema(sx__req *rq, sx__resp *rs, sx__coll_meta *m, const json_t *params)
{
    int64_t dim = 0;
    if (sx__jint(rq->body, "dimension", &dim) != 0) {
        fail_type(rs, "CollectionReq", "dimension", "int32");
        return false;
    }
    if (dim <= 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter[expected=collectionName & dimension][actual=collectionName]: "
                 "dimension is required for quickly create collection(default metric type: "
                 "COSINE)");
        return false;
    }
    if (dim > SX_MAX_DIM) { /* checked here: the field's uint32 would show a truncated value */
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: dimension should be in range 1..%u, got %lld", SX_MAX_DIM,
                 (long long)dim);
        return false;
    }
    const char *id_type = "Int64", *pk = "id", *vec = "vector", *metric = NULL;
    bool auto_id = false;
    if (sx__jstr(rq->body, "idType", &id_type) != 0 ||
        sx__jstr(rq->body, "primaryFieldName", &pk) != 0 ||
        sx__jstr(rq->body, "vectorFieldName", &vec) != 0 ||
        sx__jstr(rq->body, "metricType", &metric) != 0) {
        fail_type(rs, "CollectionReq", "idType", "string");
        return false;
    }
    if (sx__jbool(rq->body, "autoID", &auto_id) != 0) {
        fail_type(rs, "CollectionReq", "autoID", "bool");
        return false;
    }
    if (!*pk)
        pk = "id";
    if (!*vec)
        vec = "vector";
    bool varchar;
    if (!*id_type || !strcmp(id_type, "Int64") || !strcmp(id_type, "int64"))
        varchar = false;
    else if (!strcmp(id_type, "VarChar") || !strcmp(id_type, "Varchar"))
        varchar = true;
    else {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter[expected=Int64, Varchar][actual=%s]: idType can only be "
                 "[Int64, VarChar], default: Int64",
                 id_type);
        return false;
    }
    int64_t max_len = 0;
    if (varchar) {
        int r = type_param(params, "max_length", &max_len);
        if (r <= 0 || max_len <= 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter[expected=max_length][actual=nil]: max_length should be "
                     "specified (params.max_length) when idType is VarChar");
            return false;
        }
        if (max_len > SX_MAX_VARCHAR) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: max_length should be in range 1..%u, got %lld",
                     SX_MAX_VARCHAR, (long long)max_len);
            return false;
        }
        if (auto_id) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: autoID on a VarChar primary key is not supported by "
                     "Sextant yet (use Int64)");
            return false;
        }
    }
    m->vecs[0].metric = SX_METRIC_COSINE;
    if (metric && *metric &&
        (!sx__metric_parse(metric, &m->vecs[0].metric) ||
         !metric_fits(SX_FIELD_FLOAT_VECTOR, m->vecs[0].metric))) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: metric type %s not found or not supported for a "
                 "FloatVector field, supported: [L2 IP COSINE]",
                 metric);
        return false;
    }
    if (!set_field(&m->fields[0], pk, varchar ? "VarChar" : "Int64") ||
        !set_field(&m->fields[1], vec, "FloatVector")) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: field name too long");
        return false;
    }
    m->fields[0].is_primary = true;
    m->fields[0].auto_id = auto_id;
    m->fields[0].max_length = varchar ? (uint32_t)max_len : 0;
    m->fields[1].dim = (uint32_t)dim;
    m->n_fields = 2;
    m->enable_dynamic = true;
    if (sx__jbool(params, "enableDynamicField", &m->enable_dynamic) != 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: params.enableDynamicField must be true or false");
        return false;
    }
    return true;
}

/* enable_analyzer / analyzer_params of a VarChar field (elementTypeParams; values may be strings,
 * as Milvus stringifies them): the analyzer is built once to check it. */
static bool analyzer_params(sx__resp *rs, sx__field_meta *f, const json_t *tp)
{
    const json_t *ea = sx__jget(tp, "enable_analyzer");
    bool on = false;
    if (ea && sx__jbool(tp, "enable_analyzer", &on) != 0) {
        fail_type(rs, "CollectionReq", "enable_analyzer", "bool");
        return false;
    }
    json_t *ap = sx__jget(tp, "analyzer_params");
    json_t *parsed = NULL;
    if (json_is_string(ap)) { /* gRPC type params and some SDKs send it as JSON text */
        parsed = json_loads(json_string_value(ap), 0, NULL);
        ap = parsed;
        if (!json_is_object(ap)) {
            json_decref(parsed);
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: analyzer_params of field %s is not a JSON object",
                     f->name);
            return false;
        }
    }
    bool ok = true;
    if (ap && !on) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: field %s has analyzer_params without enable_analyzer",
                 f->name);
        ok = false;
    }
    char why[256] = "";
    sx__analyzer *an = ok && on ? sx__analyzer_new(ap, why, sizeof why) : NULL;
    if (ok && on && !an) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: field %s: %s", f->name, why);
        ok = false;
    }
    sx__analyzer_free(an);
    char *txt = ok && ap ? json_dumps(ap, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    if (ok && txt && strlen(txt) >= sizeof f->analyzer) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: analyzer_params of field %s are longer than %zu bytes",
                 f->name, sizeof f->analyzer - 1);
        ok = false;
    }
    if (ok) {
        f->enable_analyzer = on;
        (void)snprintf(f->analyzer, sizeof f->analyzer, "%s", txt ? txt : "");
    }
    sx__jansson_free(txt);
    json_decref(parsed);
    return ok;
}

/* One schema function: BM25 only, one VarChar input with enable_analyzer, one SparseFloatVector
 * output (Milvus's rules and texts where it has them). */
static bool bm25_function(sx__resp *rs, sx__coll_meta *m, const json_t *fo)
{
    const char *name = NULL, *type = NULL;
    const json_t *in = sx__jget(fo, "inputFieldNames"), *out = sx__jget(fo, "outputFieldNames");
    if (!json_is_object(fo) || sx__jstr(fo, "name", &name) != 0 ||
        sx__jstr(fo, "type", &type) != 0 || !name || !*name || !type) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: a schema function needs a name, a type, inputFieldNames and "
                 "outputFieldNames");
        return false;
    }
    if (strcasecmp(type, "BM25") != 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: function type %s is not supported by Sextant (BM25)", type);
        return false;
    }
    if (json_array_size(in) != 1 || json_array_size(out) != 1 ||
        !json_is_string(json_array_get(in, 0)) || !json_is_string(json_array_get(out, 0))) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: BM25 function %s needs one input field and one output field",
                 name);
        return false;
    }
    const char *iname = json_string_value(json_array_get(in, 0));
    const char *oname = json_string_value(json_array_get(out, 0));
    const sx__field_meta *fi = sx__meta_field(m, iname), *fo2 = sx__meta_field(m, oname);
    if (!fi || (strcmp(fi->type, "VarChar") != 0 && strcmp(fi->type, "String") != 0) ||
        !fi->enable_analyzer) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: the input field %s of BM25 function %s must be a VarChar "
                 "field with enable_analyzer",
                 iname, name);
        return false;
    }
    int si = sx__meta_sparse_at(m, oname);
    if (!fo2 || si < 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: the output field %s of BM25 function %s must be a "
                 "SparseFloatVector field",
                 oname, name);
        return false;
    }
    sx__sparse_meta *s = &m->sparse[si];
    if (s->function[0]) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: field %s is the output of two functions (%s and %s)", oname,
                 s->function, name);
        return false;
    }
    for (size_t k = 0; k < m->n_sparse; k++)
        if (!strcmp(m->sparse[k].function, name)) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: duplicate function name %s",
                     name);
            return false;
        }
    (void)snprintf(s->function, sizeof s->function, "%s", name);
    (void)snprintf(s->bm25_input, sizeof s->bm25_input, "%s", iname);
    return true;
}

typedef struct field_counts {
    size_t pk, vec, key, sparse;
} field_counts;

/* Field i of a custom schema (fo) into m->fields[i], counted in *n. False with rs set. */
static bool
one_field(sx__resp *rs, sx__coll_meta *m, size_t i, const json_t *fo, bool auto_id, field_counts *n)
{
    const char *fname = NULL, *dtype = NULL;
    if (!json_is_object(fo) || sx__jstr(fo, "fieldName", &fname) != 0 ||
        sx__jstr(fo, "dataType", &dtype) != 0) {
        fail_type(rs, "CollectionReq", "schema.fields", "httpserver.FieldSchema");
        return false;
    }
    if (!fname || !*fname || !dtype || !*dtype) {
        const char *f = !fname || !*fname ? "FieldName" : "DataType";
        sx__fail(rs, SX__MC_MISSING_REQUIRED,
                 "missing required parameters, error: Key: 'CollectionReq.Schema.Fields[%zu]."
                 "%s' Error:Field validation for '%s' failed on the 'required' tag",
                 i, f, f);
        return false;
    }
    if (!known_type(dtype)) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "data type %s is invalid(case sensitive).: invalid parameter", dtype);
        return false;
    }
    sx__field_meta *f = &m->fields[i];
    if (!set_field(f, fname, dtype)) {
        sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: field name too long");
        return false;
    }
    if (!f->engine_type) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: data type %s (field %s) is not supported by Sextant yet "
                 "(supported: Bool, Int8, Int16, Int32, Int64, Float, Double, VarChar, "
                 "String, JSON, Array, FloatVector, Float16Vector, BFloat16Vector, "
                 "BinaryVector, SparseFloatVector)",
                 dtype, fname);
        return false;
    }
    bool nullable = false, is_pk = false, pkey = false, fauto = false;
    if (sx__jbool(fo, "nullable", &nullable) != 0 || sx__jbool(fo, "isPrimary", &is_pk) != 0 ||
        sx__jbool(fo, "isPartitionKey", &pkey) != 0 || sx__jbool(fo, "autoID", &fauto) != 0) {
        fail_type(rs, "CollectionReq", "schema.fields", "bool");
        return false;
    }
    bool sparse = sx__field_is_sparse(f);
    if (nullable && (is_pk || sx_field_is_vector(f->engine_type) || sparse)) {
        sx__fail(rs, SX__MC_INVALID_PARAM, /* Milvus's words first */
                 "invalid parameter: %s not support null: %s field %s cannot be nullable",
                 is_pk ? "primary field" : "vector type", is_pk ? "the primary key" : "the vector",
                 fname);
        return false;
    }
    if (sparse) {
        if (++n->sparse + n->vec > SX_MAX_VECTOR_FIELDS) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: maximum vector field's number should be limited to "
                     "%u (field %s)",
                     SX_MAX_VECTOR_FIELDS, fname);
            return false;
        }
        if (is_pk || pkey) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: the sparse vector field %s cannot be a primary or "
                     "partition key",
                     fname);
            return false;
        }
        f->max_length = SX_MAX_VARCHAR; /* the engine's sparse text */
    }
    f->nullable = nullable;
    const json_t *tp = sx__jget(fo, "elementTypeParams");
    int64_t v = 0;
    if (sx_field_is_vector(f->engine_type)) {
        if (++n->vec + n->sparse > SX_MAX_VECTOR_FIELDS) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: maximum vector field's number should be limited to "
                     "%u (field %s is vector field number %zu)",
                     SX_MAX_VECTOR_FIELDS, fname, n->vec);
            return false;
        }
        int r = type_param(tp, "dim", &v);
        if (r <= 0 || v <= 0 || v > SX_MAX_DIM) {
            char got[32];
            if (r > 0)
                (void)snprintf(got, sizeof got, "%lld", (long long)v);
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: dim of field %s should be in range 1..%u, got %s", fname,
                     SX_MAX_DIM,
                     r == 0  ? "nothing"
                     : r < 0 ? "a bad value"
                             : got);
            return false;
        }
        if (f->engine_type == SX_FIELD_BINARY_VECTOR && v % 8 != 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: dimension of binary vector field %s has to be multiple "
                     "of 8, got %lld",
                     fname, (long long)v);
            return false;
        }
        f->dim = (uint32_t)v;
    }
    if (!strcmp(dtype, "VarChar") || !strcmp(dtype, "String")) {
        int r = type_param(tp, "max_length", &v);
        if (r <= 0 || v <= 0 || v > SX_MAX_VARCHAR) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: type param(max_length) should be specified for the "
                     "field(%s) of collection %s, in range 1..%u",
                     fname, m->name, SX_MAX_VARCHAR);
            return false;
        }
        f->max_length = (uint32_t)v;
        if (!analyzer_params(rs, f, tp))
            return false;
    }
    if (!strcmp(dtype, "JSON"))
        f->max_length = SX_MAX_VARCHAR;
    if (!strcmp(dtype, "Array") && !array_params(rs, m, f, fo, tp))
        return false;
    if (pkey) {
        const char *why = NULL;
        if (++n->key > 1)
            why = "there are more than one partition key";
        else if (is_pk)
            why = "the partition key field must not be primary field";
        else if (strcmp(dtype, "Int64") != 0 && strcmp(dtype, "VarChar") != 0)
            why = "the data type of partition key should be Int64 or VarChar";
        else if (nullable)
            why = "partition key field not support nullable";
        if (why) {
            sx__fail(rs, SX__MC_INVALID_PARAM, "invalid parameter: %s, field name = %s", why,
                     fname);
            return false;
        }
    }
    f->is_partition_key = pkey;
    if (is_pk) {
        if (++n->pk > 1) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: there are more than one primary key, field name = %s",
                     fname);
            return false;
        }
        if (strcmp(dtype, "Int64") != 0 && strcmp(dtype, "VarChar") != 0) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: the data type of primary key should be Int64 or "
                     "VarChar");
            return false;
        }
        f->is_primary = true;
        f->auto_id = auto_id || fauto;
        if (f->auto_id && f->engine_type != SX_FIELD_INT64) {
            sx__fail(rs, SX__MC_INVALID_PARAM,
                     "invalid parameter: autoID on a VarChar primary key is not supported by "
                     "Sextant yet (use Int64)");
            return false;
        }
    }
    const json_t *dv = sx__jget(fo, "defaultValue"); /* NULL for JSON null too */
    if (dv && !sx__field_set_default(rs, f, dv))
        return false;
    const char *desc = NULL;
    if (sx__jstr(fo, "description", &desc) == 0 && desc)
        (void)snprintf(f->description, sizeof f->description, "%s", desc);
    return true;
}

static bool custom_schema(sx__resp *rs, sx__coll_meta *m, const json_t *schema)
{
    const json_t *fields = sx__jget(schema, "fields");
    bool auto_id = false;
    if (sx__jbool(schema, "autoID", &auto_id) != 0) {
        fail_type(rs, "CollectionReq", "schema.autoID", "bool");
        return false;
    }
    if (sx__jbool(schema, "enableDynamicField", &m->enable_dynamic) != 0) {
        fail_type(rs, "CollectionReq", "schema.enableDynamicField", "bool");
        return false;
    }
    const json_t *fns = sx__jget(schema, "functions");
    if (fns && !json_is_array(fns)) {
        fail_type(rs, "CollectionReq", "schema.functions", "[]httpserver.FunctionSchema");
        return false;
    }
    if (json_array_size(fields) > SX_MAX_FIELDS - 2) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: the number of fields should be at most %u", SX_MAX_FIELDS - 2);
        return false;
    }
    size_t i;
    field_counts n = { 0, 0, 0, 0 };
    const json_t *fo;
    json_array_foreach(fields, i, fo) {
        if (!one_field(rs, m, i, fo, auto_id, &n))
            return false;
    }
    m->n_fields = json_array_size(fields);
    /* the sparse entries by schema order (the catalog keeps them by name), then the functions */
    m->n_sparse = 0;
    for (size_t k = 0; k < m->n_fields && m->n_sparse < SX_MAX_VECTOR_FIELDS; k++)
        if (sx__field_is_sparse(&m->fields[k]))
            (void)snprintf(m->sparse[m->n_sparse++].field, sizeof m->sparse[0].field, "%s",
                           m->fields[k].name);
    json_array_foreach(fns, i, fo) {
        if (!bm25_function(rs, m, fo))
            return false;
    }
    if (n.pk == 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: schema does not contain primary key field");
        return false;
    }
    if (n.vec + n.sparse == 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: schema does not contain vector field (one to %u FloatVector "
                 "or SparseFloatVector fields)",
                 SX_MAX_VECTOR_FIELDS);
        return false;
    }
    return true;
}

static bool same_schema(const sx__coll_meta *a, const sx__coll_meta *b)
{
    if (a->n_fields != b->n_fields || a->enable_dynamic != b->enable_dynamic ||
        a->key_parts != b->key_parts)
        return false;
    for (size_t i = 0; i < a->n_fields; i++) {
        const sx__field_meta *x = &a->fields[i], *y = &b->fields[i];
        if (strcmp(x->name, y->name) != 0 || strcmp(x->type, y->type) != 0 ||
            x->is_primary != y->is_primary || x->auto_id != y->auto_id || x->dim != y->dim ||
            x->max_length != y->max_length || x->is_partition_key != y->is_partition_key ||
            strcmp(x->elem_type, y->elem_type) != 0 || x->max_capacity != y->max_capacity ||
            x->elem_max_length != y->elem_max_length || x->nullable != y->nullable ||
            strcmp(x->default_json, y->default_json) != 0)
            return false;
    }
    return true;
}

/* A repeated create is fine when it asks for what exists; a vector field it names no metric for
 * (pending) matches whatever metric the field's index has chosen since. m's vecs[] are by
 * position (not laid out yet), as old's are once the schemas match. */
static bool same_create(const sx__coll_meta *old, const sx__coll_meta *m)
{
    if (!same_schema(old, m))
        return false;
    for (size_t i = 0; i < old->n_vecs; i++)
        if (!m->vecs[i].metric_pending && old->vecs[i].metric != m->vecs[i].metric)
            return false;
    return true;
}

/* The position of vector field `name` among the schema's vector fields, -1 if it is none. */
static int vec_pos(const sx__coll_meta *m, const char *name)
{
    int k = 0;
    for (size_t i = 0; i < m->n_fields; i++) {
        if (!sx_field_is_vector(m->fields[i].engine_type))
            continue;
        if (strcmp(m->fields[i].name, name) == 0)
            return k;
        k++;
    }
    return -1;
}

/* The k-th vector field of the schema (NULL: fewer). */
static const sx__field_meta *vec_field_at(const sx__coll_meta *m, size_t k)
{
    for (size_t i = 0; i < m->n_fields; i++)
        if (sx_field_is_vector(m->fields[i].engine_type) && k-- == 0)
            return &m->fields[i];
    return NULL;
}

static bool valid_consistency(const char *s)
{
    static const char *const names[] = { "Strong", "Session", "Bounded", "Eventually",
                                         "Customized" };
    for (size_t i = 0; i < 5; i++)
        if (strcmp(s, names[i]) == 0)
            return true;
    return false;
}

/* Partition key mode: params.partitionsNum (a number or its digits; Milvus's default when the
 * schema has a partition key and none is given), refused without a partition key field. */
static bool key_partitions(sx__resp *rs, sx__coll_meta *m, const json_t *params)
{
    bool has_key = false;
    for (size_t i = 0; i < m->n_fields; i++)
        has_key |= m->fields[i].is_partition_key;
    const json_t *pn = sx__jget(params, "partitionsNum");
    int64_t n = SX__DEFAULT_KEY_PARTS;
    if (pn && sx__jint(params, "partitionsNum", &n) != 0) {
        fail_type(rs, "CollectionReq", "params.partitionsNum", "int64");
        return false;
    }
    if (pn && !has_key) {
        /* 0 is what clients send when they mean "not given" (gRPC's num_partitions) */
        if (n == 0)
            return true;
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: num_partitions should only be specified with partition key "
                 "field enabled");
        return false;
    }
    if (!has_key)
        return true;
    if (pn && n == 0)
        n = SX__DEFAULT_KEY_PARTS;
    if (n < 0) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: the specified partitions should be greater than 0 if "
                 "partition key is used");
        return false;
    }
    if (n > (int64_t)SX__MAX_KEY_PARTS) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: partition number (%lld) exceeds max configuration (%u)",
                 (long long)n, SX__MAX_KEY_PARTS);
        return false;
    }
    m->key_parts = (uint32_t)n;
    return true;
}

static void h_create(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "CollectionReq", &name) ||
        !sx__check_coll_name(rs, name, "name"))
        return;
    if (!sx__cat_db_exists(rq->cat, rq->db_name)) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", rq->db_name);
        return;
    }
    sx__coll_meta *m = sx__calloc(1, sizeof *m), *old = sx__malloc(sizeof *old);
    sx_collection *h = NULL;
    if (!m || !old) {
        sx__fail(rs, SX__MC_UNEXPECTED, "out of memory");
        goto out;
    }
    (void)snprintf(m->name, sizeof m->name, "%s", name);
    const json_t *schema = sx__jget(rq->body, "schema");
    const json_t *fields = sx__jget(schema, "fields");
    const json_t *params = sx__jget(rq->body, "params");
    const json_t *ips = sx__jget(rq->body, "indexParams");
    if ((schema && !json_is_object(schema)) || (fields && !json_is_array(fields)) ||
        (params && !json_is_object(params)) || (ips && !json_is_array(ips))) {
        fail_type(rs, "CollectionReq", "schema", "object");
        goto out;
    }
    const char *desc = NULL;
    if (sx__jstr(rq->body, "description", &desc) != 0) {
        fail_type(rs, "CollectionReq", "description", "string");
        goto out;
    }
    (void)snprintf(m->description, sizeof m->description, "%s", desc ? desc : "");
    const json_t *cl = sx__jget(params, "consistencyLevel");
    if (cl && (!json_is_string(cl) || !valid_consistency(json_string_value(cl)))) {
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter[expected=Strong, Session, Bounded, Eventually, "
                 "Customized][actual=%s]: consistencyLevel can only be [Strong, Session, Bounded, "
                 "Eventually, Customized], default: Bounded",
                 json_is_string(cl) ? json_string_value(cl) : "?");
        goto out;
    }
    (void)snprintf(m->consistency, sizeof m->consistency, "%s",
                   cl ? json_string_value(cl) : "Bounded");
    int64_t shards = 1;
    if (sx__jget(params, "shardsNum") && sx__jint(params, "shardsNum", &shards) != 0) {
        fail_type(rs, "CollectionReq", "params.shardsNum", "int32");
        goto out;
    }
    if (shards > SX__MAX_SHARDS) { /* Milvus's proxy.maxShardNum and its text */
        sx__fail(rs, SX__MC_INVALID_PARAM, "maximum shards's number should be limited to %d",
                 SX__MAX_SHARDS);
        goto out;
    }
    m->shards = shards >= 1 ? (uint32_t)shards : 1; /* 0 or less: the default, as Milvus */
    bool quick = json_array_size(fields) == 0;
    if (quick ? !quick_schema(rq, rs, m, params) : !custom_schema(rs, m, schema))
        goto out;
    m->has_partitions = true;
    if (!key_partitions(rs, m, params))
        goto out;
    const sx__field_meta *vf = sx__meta_vector_field(m);
    /* every indexParams field must exist; a custom schema's vector field with an entry takes the
     * entry's metricType, else the request's metricType, else COSINE; one without an entry
     * stays pending. vecs[k] is the k-th vector field (sx__cat_coll_create lays them out). */
    bool metric_from_index[SX_MAX_VECTOR_FIELDS] = { false },
         vec_index[SX_MAX_VECTOR_FIELDS] = { false };
    size_t i;
    const json_t *ip;
    json_array_foreach(ips, i, ip) {
        const char *fname = NULL, *metric = NULL;
        if (!json_is_object(ip) || sx__jstr(ip, "fieldName", &fname) != 0 ||
            sx__jstr(ip, "metricType", &metric) != 0) {
            fail_type(rs, "CollectionReq", "indexParams", "httpserver.IndexParam");
            goto out;
        }
        bool found = false;
        for (size_t k = 0; fname && k < m->n_fields; k++)
            found |= strcmp(m->fields[k].name, fname) == 0;
        if (!found) {
            sx__fail(rs, SX__MC_MISSING_REQUIRED,
                     "missing required parameters, error: `%s` hasn't defined in schema",
                     fname ? fname : "");
            goto out;
        }
        int k = quick ? -1 : vec_pos(m, fname);
        if (k < 0)
            continue;
        vec_index[k] = true;
        if (metric && *metric) {
            const sx__field_meta *kf = vec_field_at(m, (size_t)k);
            if (!sx__metric_parse(metric, &m->vecs[k].metric) ||
                (kf && !metric_fits(kf->engine_type, m->vecs[k].metric))) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: metric type %s not found or not supported by "
                         "Sextant, supported: [L2 IP COSINE HAMMING JACCARD]",
                         metric);
                goto out;
            }
            metric_from_index[k] = true;
        }
    }
    for (size_t k = 0; !quick && k < SX_MAX_VECTOR_FIELDS; k++) {
        sx__vec_meta *v = &m->vecs[k];
        const sx__field_meta *vfm = vec_field_at(m, k);
        bool bin = vfm && vfm->engine_type == SX_FIELD_BINARY_VECTOR;
        if (!vec_index[k]) {
            /* raw vectors: any metric of the type can follow (sx_collection_set_metric_on) */
            v->metric = bin ? SX_METRIC_HAMMING : SX_METRIC_L2;
            v->metric_pending = true;
        } else if (!metric_from_index[k]) {
            const char *metric = NULL;
            v->metric = bin ? SX_METRIC_HAMMING : SX_METRIC_COSINE;
            if (sx__jstr(rq->body, "metricType", &metric) == 0 && metric && *metric &&
                !sx__metric_parse(metric, &v->metric)) {
                sx__fail(rs, SX__MC_INVALID_PARAM,
                         "invalid parameter: metric type %s not found or not supported by "
                         "Sextant, supported: [L2 IP COSINE HAMMING JACCARD]",
                         metric);
                goto out;
            }
        }
    }
    /* properties: ttlSeconds and the like */
    json_t *props = json_object();
    int64_t ttl = 0;
    if (props && sx__jint(params, "ttlSeconds", &ttl) == 0 && sx__jget(params, "ttlSeconds")) {
        char buf[32];
        (void)snprintf(buf, sizeof buf, "%lld", (long long)ttl);
        json_object_set_new(props, "collection.ttl.seconds", json_string(buf));
    }
    bool fits = props && set_meta_props(m, props);
    json_decref(props);
    if (!fits)
        (void)snprintf(m->properties, sizeof m->properties, "{}");

    sx_status st = sx__cat_coll_get(rq->cat, rq->db_name, name, NULL, old);
    if (st == SX_OK && strcmp(old->name, name) != 0) { /* the name is an alias */
        sx__fail(rs, SX__MC_INVALID_PARAM,
                 "invalid parameter: collection name [%s] conflicts with an existing alias of "
                 "collection %s",
                 name, old->name);
        goto out;
    }
    if (st == SX_OK) {
        if (same_create(old, m))
            sx__ok(rs, NULL);
        else
            sx__fail(rs, SX__MC_UNEXPECTED,
                     "create duplicate collection with different parameters, collection: %s", name);
        goto out;
    }
    st = sx__cat_coll_create(rq->cat, rq->db_name, m);
    if (st == SX_EEXIST) { /* a concurrent create of the same name won */
        if (sx__cat_coll_get(rq->cat, rq->db_name, name, NULL, old) == SX_OK && same_create(old, m))
            sx__ok(rs, NULL);
        else
            sx__fail(rs, SX__MC_UNEXPECTED,
                     "create duplicate collection with different parameters, collection: %s", name);
        goto out;
    }
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "create collection");
        goto out;
    }
    if (!quick && json_array_size(ips) == 0) {
        sx__ok(rs, NULL);
        goto out;
    }
    st = sx__cat_coll_get(rq->cat, rq->db_name, name, &h, m);
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "create collection");
        goto out;
    }
    if (quick) {
        json_t *qip =
            json_pack("{s:s,s:s,s:s,s:s}", "fieldName", vf->name, "indexName", vf->name,
                      "metricType", sx__metric_name(m->vecs[0].metric), "indexType", "AUTOINDEX");
        bool ok = qip && sx__index_apply(rq, rs, h, m, qip);
        json_decref(qip);
        if (!ok)
            goto out;
    } else {
        json_array_foreach(ips, i, ip) {
            if (!sx__index_apply(rq, rs, h, m, ip))
                goto out;
        }
    }
    if (!sx__coll_load(rq, rs, h, m))
        goto out;
    sx__ok(rs, NULL);
out:
    if (h)
        sx_collection_release(h);
    sx__free(m);
    sx__free(old);
}

/* ---------------------------------------------------------------- describe, list, has, drop */

static json_t *field_json(const sx__field_meta *f)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(f->name));
    json_object_set_new(o, "id", json_integer(f->field_id));
    json_object_set_new(o, "type", json_string(f->type));
    json_object_set_new(o, "primaryKey", json_boolean(f->is_primary));
    json_object_set_new(o, "partitionKey", json_boolean(f->is_partition_key));
    json_object_set_new(o, "clusteringKey", json_false());
    json_object_set_new(o, "autoId", json_boolean(f->auto_id));
    json_object_set_new(o, "nullable", json_boolean(f->nullable));
    json_object_set_new(o, "description", json_string(f->description));
    if (f->default_json[0]) {
        json_t *dv = json_loads(f->default_json, JSON_DECODE_ANY, NULL);
        if (dv)
            json_object_set_new(o, "defaultValue", dv);
    }
    char buf[32];
    if (sx_field_is_vector(f->engine_type)) {
        (void)snprintf(buf, sizeof buf, "%u", f->dim);
        json_object_set_new(o, "params", json_pack("[{s:s,s:s}]", "key", "dim", "value", buf));
    } else if (!strcmp(f->type, "VarChar") || !strcmp(f->type, "String")) {
        (void)snprintf(buf, sizeof buf, "%u", f->max_length);
        json_t *ps = json_pack("[{s:s,s:s}]", "key", "max_length", "value", buf);
        if (f->enable_analyzer) {
            json_array_append_new(
                ps, json_pack("{s:s,s:s}", "key", "enable_analyzer", "value", "true"));
            if (f->analyzer[0])
                json_array_append_new(
                    ps, json_pack("{s:s,s:s}", "key", "analyzer_params", "value", f->analyzer));
        }
        json_object_set_new(o, "params", ps);
    } else if (f->elem_type[0]) {
        json_object_set_new(o, "elementType", json_string(f->elem_type));
        (void)snprintf(buf, sizeof buf, "%u", f->max_capacity);
        json_t *ps = json_pack("[{s:s,s:s}]", "key", "max_capacity", "value", buf);
        if (f->elem_max_length) {
            (void)snprintf(buf, sizeof buf, "%u", f->elem_max_length);
            json_array_append_new(ps, json_pack("{s:s,s:s}", "key", "max_length", "value", buf));
        }
        json_object_set_new(o, "params", ps);
    }
    return o;
}

static void h_describe(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", &h, &m))
        return;
    json_t *d = json_object();
    const sx__field_meta *pk = sx__meta_primary_field(m);
    json_object_set_new(d, "collectionName", json_string(m->name));
    json_object_set_new(d, "collectionID", json_integer(m->collection_id));
    json_object_set_new(d, "description", json_string(m->description));
    json_object_set_new(d, "autoId", json_boolean(pk && pk->auto_id));
    json_t *fields = json_array();
    for (size_t i = 0; i < m->n_fields; i++)
        json_array_append_new(fields, field_json(&m->fields[i]));
    json_object_set_new(d, "fields", fields);
    json_t *fns = json_array();
    for (size_t i = 0; i < m->n_sparse; i++) {
        const sx__sparse_meta *s = &m->sparse[i];
        if (s->function[0])
            json_array_append_new(fns,
                                  json_pack("{s:s,s:s,s:s,s:[s],s:[s],s:[]}", "name", s->function,
                                            "type", "BM25", "description", "", "inputFieldNames",
                                            s->bm25_input, "outputFieldNames", s->field, "params"));
    }
    for (size_t i = 0; i < json_array_size(fields); i++) {
        json_t *fo = json_array_get(fields, i);
        int si = sx__meta_sparse_at(m, json_string_value(json_object_get(fo, "name")));
        if (si >= 0 && m->sparse[si].function[0])
            json_object_set_new(fo, "isFunctionOutput", json_true());
    }
    json_object_set_new(d, "functions", fns);
    json_t *al = json_array();
    for (size_t i = 0; i < m->n_aliases; i++)
        json_array_append_new(al, json_string(m->aliases[i]));
    json_object_set_new(d, "aliases", al);
    json_t *idx = json_array();
    for (size_t i = 0; i < m->n_vecs; i++) {
        const sx__vec_meta *v = &m->vecs[i];
        if (v->index_name[0])
            json_array_append_new(idx, json_pack("{s:s,s:s,s:s}", "fieldName", v->field,
                                                 "indexName", v->index_name, "metricType",
                                                 sx__metric_name(v->metric)));
    }
    for (size_t i = 0; i < m->n_sparse; i++) {
        const sx__sparse_meta *s = &m->sparse[i];
        if (s->index_name[0])
            json_array_append_new(idx, json_pack("{s:s,s:s,s:s}", "fieldName", s->field,
                                                 "indexName", s->index_name, "metricType",
                                                 s->function[0] ? "BM25" : "IP"));
    }
    json_object_set_new(d, "indexes", idx);
    int progress = 0;
    json_object_set_new(d, "load", json_string(load_state(h, m, &progress)));
    json_object_set_new(d, "shardsNum", json_integer((json_int_t)m->shards));
    json_object_set_new(d, "partitionsNum", json_integer((json_int_t)sx__meta_n_parts(m)));
    json_object_set_new(d, "consistencyLevel", json_string(m->consistency));
    json_object_set_new(d, "enableDynamicField", json_boolean(m->enable_dynamic));
    json_t *props = meta_props(m);
    json_object_set_new(d, "properties", sx__props_to_kv(props));
    json_decref(props);
    json_object_set_new(d, "createdTime", json_integer(m->created_ms));
    sx__ok(rs, d);
    json_object_set_new(rs->body, "message", json_string(""));
    sx__req_coll_done(h, m);
}

static void h_list(sx__req *rq, sx__resp *rs)
{
    char **names = NULL;
    size_t n = 0;
    sx_status st = sx__cat_coll_list(rq->cat, rq->db_name, &names, &n);
    if (st == SX_ENOTFOUND) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", rq->db_name);
        return;
    }
    if (st != SX_OK) {
        sx__fail_st(rs, st, SX__MC_DB_NOT_FOUND, "list collections");
        return;
    }
    json_t *arr = json_array();
    for (size_t i = 0; i < n; i++)
        json_array_append_new(arr, json_string(names[i]));
    sx_strings_free(names, n);
    sx__ok(rs, arr);
}

static void h_has(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "CollectionNameReq", &name))
        return;
    if (!sx__cat_db_exists(rq->cat, rq->db_name)) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", rq->db_name);
        return;
    }
    sx_status st = sx__cat_coll_get(rq->cat, rq->db_name, name, NULL, NULL);
    if (st != SX_OK && st != SX_ENOTFOUND) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "has collection");
        return;
    }
    sx__ok(rs, json_pack("{s:b}", "has", st == SX_OK));
}

static void h_drop(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "CollectionNameReq", &name))
        return;
    if (!sx__cat_db_exists(rq->cat, rq->db_name)) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", rq->db_name);
        return;
    }
    sx_status st = sx__cat_coll_drop(rq->cat, rq->db_name, name);
    if (st != SX_OK && st != SX_ENOTFOUND) {
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "drop collection");
        return;
    }
    sx__ok(rs, NULL);
}

static void h_get_stats(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", &h, &m))
        return;
    uint64_t n = 0;
    sx_status st = sx_count(h, NULL, &n);
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "get collection stats");
    else
        sx__ok(rs, json_pack("{s:I}", "rowCount", (json_int_t)n));
    sx__req_coll_done(h, m);
}

/* ---------------------------------------------------------------- load state */

static void h_load(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", &h, &m))
        return;
    if (sx__coll_load(rq, rs, h, m))
        sx__ok(rs, NULL);
    sx__req_coll_done(h, m);
}

static sx_status release_fn(void *ctx, sx__coll_meta *m)
{
    (void)ctx;
    m->loaded = false;
    return SX_OK;
}

static void h_release(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", NULL, &m))
        return;
    sx_status st =
        m->loaded ? sx__cat_coll_modify(rq->cat, rq->db_name, m->name, release_fn, NULL) : SX_OK;
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "release collection");
    else
        sx__ok(rs, NULL);
    sx__req_coll_done(h, m);
}

static void h_get_load_state(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionNameReq", &h, &m))
        return;
    const json_t *pn = sx__jget(rq->body, "partitionNames");
    size_t i;
    const json_t *p;
    if (pn && !json_is_array(pn)) {
        fail_type(rs, "CollectionNameReq", "partitionNames", "[]string");
        goto out;
    }
    json_array_foreach(pn, i, p) {
        bool found = false;
        for (size_t k = 0; json_is_string(p) && k < m->n_parts; k++)
            found |= strcmp(m->parts[k], json_string_value(p)) == 0;
        if (!found) {
            sx__fail(rs, SX__MC_PART_NOT_FOUND, "partition not found[partition=%s]",
                     json_is_string(p) ? json_string_value(p) : "?");
            goto out;
        }
    }
    int progress = 0;
    const char *state = load_state(h, m, &progress);
    json_t *d = json_pack("{s:s}", "loadState", state);
    if (m->loaded)
        json_object_set_new(d, "loadProgress", json_integer(progress));
    sx__ok(rs, d);
    json_object_set_new(rs->body, "message", json_string(""));
out:
    sx__req_coll_done(h, m);
}

/* ---------------------------------------------------------------- rename, properties */

static void h_rename(sx__req *rq, sx__resp *rs)
{
    const char *name = NULL, *new_name = NULL, *new_db = NULL;
    if (!sx__need_str(rq, rs, "collectionName", "RenameCollectionReq", &name) ||
        !sx__need_str(rq, rs, "newCollectionName", "RenameCollectionReq", &new_name) ||
        !sx__check_coll_name(rs, new_name, "name"))
        return;
    if (sx__jstr(rq->body, "newDbName", &new_db) != 0) {
        fail_type(rs, "RenameCollectionReq", "newDbName", "string");
        return;
    }
    if (!sx__cat_db_exists(rq->cat, rq->db_name)) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", rq->db_name);
        return;
    }
    if (new_db && *new_db && !sx__cat_db_exists(rq->cat, new_db)) {
        sx__fail(rs, SX__MC_DB_NOT_FOUND, "database not found[database=%s]", new_db);
        return;
    }
    sx_status st = sx__cat_coll_rename(rq->cat, rq->db_name, name, new_db, new_name);
    if (st == SX_ENOTFOUND)
        sx__fail(rs, SX__MC_COLL_NOT_FOUND, SX__COLL_NOT_FOUND, rq->db_name, name);
    else if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "rename collection");
    else
        sx__ok(rs, NULL);
}

/* Properties change of alter_properties (set) / drop_properties (del). */
typedef struct props_ctx {
    const json_t *set; /* object: members to set, or NULL */
    const json_t *del; /* array of keys to remove, or NULL */
    bool too_large;
} props_ctx;

static sx_status props_fn(void *ctx, sx__coll_meta *m)
{
    props_ctx *p = ctx;
    json_t *props = meta_props(m);
    if (!props)
        return sx__err(SX_ENOMEM, "properties");
    if (p->set)
        sx__props_merge(props, p->set);
    size_t i;
    const json_t *k;
    json_array_foreach(p->del, i, k) {
        if (json_is_string(k))
            json_object_del(props, json_string_value(k));
    }
    bool fits = set_meta_props(m, props);
    json_decref(props);
    if (!fits) {
        p->too_large = true;
        return sx__err(SX_EINVAL, "collection properties exceed %zu bytes",
                       sizeof m->properties - 1);
    }
    return SX_OK;
}

static void h_alter_properties(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionReqWithProperties", NULL, &m))
        return;
    const json_t *np = sx__jget(rq->body, "properties");
    if (np && !json_is_object(np)) {
        fail_type(rs, "CollectionReqWithProperties", "properties", "map[string]interface {}");
        goto out;
    }
    props_ctx p = { np, NULL, false };
    sx_status st = sx__cat_coll_modify(rq->cat, rq->db_name, m->name, props_fn, &p);
    if (p.too_large)
        sx__fail(rs, SX__MC_PARAM_TOO_LARGE, "collection properties exceed %zu bytes",
                 sizeof m->properties - 1);
    else if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "alter collection properties");
    else
        sx__ok(rs, NULL);
out:
    sx__req_coll_done(NULL, m);
}

static void h_drop_properties(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "DropCollectionPropertiesReq", NULL, &m))
        return;
    const json_t *keys = sx__jget(rq->body, "propertyKeys");
    if (keys && !json_is_array(keys)) {
        fail_type(rs, "DropCollectionPropertiesReq", "propertyKeys", "[]string");
        goto out;
    }
    props_ctx p = { NULL, keys, false };
    sx_status st = sx__cat_coll_modify(rq->cat, rq->db_name, m->name, props_fn, &p);
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "drop collection properties");
    else
        sx__ok(rs, NULL);
out:
    sx__req_coll_done(NULL, m);
}

/* ---------------------------------------------------------------- flush, compaction */

static void h_flush(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "FlushReq", &h, &m))
        return;
    sx_status st = sx_flush(h);
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "flush");
    else
        sx__ok(rs, NULL);
    sx__req_coll_done(h, m);
}

static void h_compact(sx__req *rq, sx__resp *rs)
{
    sx_collection *h = NULL;
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CompactReq", &h, &m))
        return;
    sx_status st = sx_compact(h);
    if (st != SX_OK)
        sx__fail_st(rs, st, SX__MC_COLL_NOT_FOUND, "compact");
    else
        sx__ok(rs, json_pack("{s:I}", "compactionID", (json_int_t)new_job_id()));
    sx__req_coll_done(h, m);
}

static void h_get_compaction_state(sx__req *rq, sx__resp *rs)
{
    int64_t job = 0;
    if (sx__jint(rq->body, "jobID", &job) != 0) {
        fail_type(rs, "GetCompactionStateReq", "jobID", "int64");
        return;
    }
    /* sx_compact is synchronous: every compaction has completed by the time its id is known */
    sx__ok(rs, json_pack("{s:s,s:i,s:i,s:i,s:i}", "state", "Completed", "executingPlanNo", 0,
                         "timeoutPlanNo", 0, "completedPlanNo", 1, "failedPlanNo", 0));
}

static void h_fields_unsupported(sx__req *rq, sx__resp *rs)
{
    sx__coll_meta *m = NULL;
    if (!sx__req_coll(rq, rs, "CollectionFieldReqWithParams", NULL, &m))
        return;
    sx__fail(rs, SX__MC_UNSUPPORTED,
             "unsupported operation: changing the fields of an existing collection is not "
             "supported by Sextant yet (collection=%s)",
             m->name);
    sx__req_coll_done(NULL, m);
}

const sx__route sx__routes_collections[] = {
    { "/v2/vectordb/collections/create", h_create, true },
    { "/v2/vectordb/collections/describe", h_describe, false },
    { "/v2/vectordb/collections/list", h_list, false },
    { "/v2/vectordb/collections/has", h_has, false },
    { "/v2/vectordb/collections/drop", h_drop, true },
    { "/v2/vectordb/collections/get_stats", h_get_stats, false },
    { "/v2/vectordb/collections/load", h_load, true },
    { "/v2/vectordb/collections/release", h_release, true },
    { "/v2/vectordb/collections/refresh_load", h_load, true },
    { "/v2/vectordb/collections/get_load_state", h_get_load_state, false },
    { "/v2/vectordb/collections/rename", h_rename, true },
    { "/v2/vectordb/collections/alter_properties", h_alter_properties, true },
    { "/v2/vectordb/collections/drop_properties", h_drop_properties, true },
    { "/v2/vectordb/collections/flush", h_flush, true },
    { "/v2/vectordb/collections/compact", h_compact, true },
    { "/v2/vectordb/collections/get_compaction_state", h_get_compaction_state, false },
    { "/v2/vectordb/collections/fields/alter_properties", h_fields_unsupported, true },
    { "/v2/vectordb/collections/fields/add", h_fields_unsupported, true },
    { NULL, NULL, false },
};
